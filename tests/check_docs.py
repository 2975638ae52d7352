#!/usr/bin/env python3
"""The documentation's links and commands (issue #20), run by ctest (`docs_links`); under a second.

  check_docs.py SOURCE_DIR     checks the tree: exit 0, or 1 listing every problem
  check_docs.py --self-test    plants a broken link, a missing anchor, a missing script and a
                               command naming a missing file in a scratch tree, and exits 0 only
                               if each is caught (ctest `docs_links_self_test`)

Checked, in every Markdown file git tracks (every *.md outside build folders when SOURCE_DIR is
not a git checkout):
- every relative link `[text](target)` and reference `[name]: target` names a file or folder
  that exists, and its `#anchor`, in a Markdown file, one of that file's headings (GitHub's
  slugs: lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats);
- in README.md's code blocks: every `./scripts/X` (or `scripts/X`) exists and is executable,
  every other path under a folder of the repository (src/, tests/, tools/, include/, formats/,
  scripts/) exists, and every `shardpack SUBCOMMAND --option ...` (lines continued with a
  backslash included) names a subcommand and options src/cli/ declares; that last check also
  in the code blocks of every other Markdown file (the CLI reference's examples).
- README.md's "Measured" table copies its figures from scripts/bench/README.md: every number in
  its rows (dates and link targets aside) appears there, so the headline cannot drift from the
  measurements it cites (issue #35: one fact in one place).
Links to other sites (http:, https:, mailto:) are not fetched: the check runs offline."""
import os
import re
import subprocess
import sys
import tempfile

REPO_FOLDERS = ("src", "tests", "tools", "include", "formats", "scripts")
SKIP_DIRS = {".git", "build", ".venv", ".venv-tf", "out", "node_modules"}
INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.md"], check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
        if files:
            return sorted(f for f in files if os.path.isfile(os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return sorted(found)


def slug(title):
    title = re.sub(r"<[^>]+>", "", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link in a heading: its text
    s = title.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def lines_outside_code(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s{0,3}(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def code_blocks(text):
    """(line number, line) of the lines inside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s{0,3}(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is not None:
            yield n, line


def anchors(path, cache={}):
    if path not in cache:
        seen, result = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line in lines_outside_code(text):
            m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            result.add(base if k == 0 else f"{base}-{k}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
            result.add(m.group(1))
        cache[path] = result
    return cache[path]


def check_links(root, rel, problems):
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in lines_outside_code(text):
        bare = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE.finditer(bare)]
        m = REFERENCE.match(bare)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                continue  # another site: not fetched
            file_part, _, anchor = target.partition("#")
            if file_part:
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    problems.append(f"{rel}:{n}: link to {target}: {file_part} does not exist")
                    continue
                if not dest.startswith(os.path.normpath(root) + os.sep) and dest != os.path.normpath(root):
                    problems.append(f"{rel}:{n}: link to {target} leaves the repository")
                    continue
            else:
                dest = path
            if anchor and dest.endswith(".md") and os.path.isfile(dest) and anchor not in anchors(dest):
                problems.append(f"{rel}:{n}: link to {target}: no heading #{anchor} in "
                                f"{os.path.relpath(dest, root)}")


def cli_names(root):
    """(subcommands, long options) that src/cli/ declares: add_subcommand("x", ...), and every
    --word inside a string literal there (add_option/add_flag names such as "-q,--quiet")."""
    names, options = set(), {"--help"}
    cli = os.path.join(root, "src", "cli")
    for d, _, files in os.walk(cli):
        for name in files:
            if name.endswith((".cpp", ".hpp")):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    text = f.read()
                names |= set(re.findall(r"add_subcommand\(\s*\"([a-z-]+)\"", text))
                for literal in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text):
                    options |= set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", literal))
    return names, options


PATH_TOKEN = re.compile(r"(?<![\w/.-])(\./)?((?:%s)/[\w./-]*[\w/])" % "|".join(REPO_FOLDERS))


def check_commands(root, rel, problems, names):
    """README.md: paths, scripts and shardpack commands; other files: shardpack commands."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    subcommands, options = names
    joined = []  # shell lines continued with a trailing backslash are one command
    for n, line in code_blocks(text):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#include") else line
        if joined and joined[-1][1].rstrip().endswith("\\"):
            joined[-1] = (joined[-1][0], joined[-1][1].rstrip()[:-1] + " " + code)
        else:
            joined.append((n, code))
    for n, code in joined:
        for m in PATH_TOKEN.finditer(code if rel == "README.md" else ""):
            path = m.group(2)
            dest = os.path.join(root, path)
            if not os.path.exists(dest):
                problems.append(f"README.md:{n}: {path} does not exist")
            elif path.startswith("scripts/") and os.path.isfile(dest) and path.endswith(".sh") \
                    and not os.access(dest, os.X_OK):
                problems.append(f"README.md:{n}: {path} is not executable")
        for m in re.finditer(r"(?:^|[;&|]\s*|\s)shardpack\s+([a-z][a-z-]*)([^;&|]*)", code):
            word = m.group(1)
            if subcommands and word not in subcommands:
                problems.append(f"{rel}:{n}: `shardpack {word}`: src/cli/ declares no such "
                                f"subcommand (it has {', '.join(sorted(subcommands))})")
            for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", m.group(2)):
                if subcommands and opt not in options:
                    problems.append(f"{rel}:{n}: `shardpack {word} ... {opt}`: src/cli/ declares "
                                    f"no option {opt}")


NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def check_measured(root, problems):
    """Every number of README.md's "Measured" table appears in scripts/bench/README.md."""
    readme, bench = os.path.join(root, "README.md"), os.path.join(root, "scripts", "bench", "README.md")
    if not os.path.exists(readme) or not os.path.exists(bench):
        return
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    if "\n## Measured\n" not in text:
        return
    with open(bench, encoding="utf-8") as f:
        measured = set(NUMBER.findall(f.read()))
    section = text.split("\n## Measured\n", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        row = DATE.sub("", re.sub(r"\]\([^)]*\)", "]", line))
        for number in NUMBER.findall(row):
            if number not in measured:
                problems.append(f"README.md: Measured: {number} is not in scripts/bench/README.md ({line[:60]}...)")


def check(root):
    problems = []
    files = markdown_files(root)
    if not files:
        problems.append(f"no Markdown files found under {root}")
    names = cli_names(root)
    for rel in files:
        check_links(root, rel, problems)
        check_commands(root, rel, problems, names)
    if "README.md" not in files:
        problems.append("README.md is missing")
    check_measured(root, problems)
    return files, problems


def self_test():
    """Each planted fault must be reported; a clean tree must pass."""
    with tempfile.TemporaryDirectory(prefix="check-docs-") as root:
        os.makedirs(os.path.join(root, "scripts"))
        os.makedirs(os.path.join(root, "src", "cli"))
        os.makedirs(os.path.join(root, "docs"))
        os.makedirs(os.path.join(root, "scripts", "bench"))
        with open(os.path.join(root, "scripts", "bench", "README.md"), "w") as f:
            f.write("# Bench\n\n| job | rate |\n|---|---|\n| read | 1,234/s, 2.5x |\n")
        with open(os.path.join(root, "src", "cli", "main.cpp"), "w") as f:
            f.write('app.add_subcommand("build", "x");\nb->add_option("--csv", csv, "List");\n')
        script = os.path.join(root, "scripts", "demo.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(script, 0o755)
        with open(os.path.join(root, "docs", "guide.md"), "w") as f:
            f.write("# Guide\n\n## Two words\n\nBack to [the README](../README.md#top).\n")
        good = ("# Top\n\nSee [the guide](docs/guide.md#two-words) and [here](#top).\n\n"
                "```sh\n./scripts/demo.sh\nshardpack build --csv x.csv\n```\n\n"
                "## Measured\n\n| job (date) | rate |\n|---|---|\n"
                "| [read](scripts/bench/README.md#bench) (2026-11-23) | 1,234/s, 2.5x |\n\n## After\n")
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write(good)
        _, problems = check(root)
        if problems:
            print("self-test: a clean tree was refused:", *problems, sep="\n  ")
            return 1
        faults = {
            "a missing file": ("[x](docs/missing.md)", "docs/missing.md does not exist"),
            "a missing anchor": ("[x](docs/guide.md#three-words)", "no heading #three-words"),
            "a missing same-file anchor": ("[x](#nowhere)", "no heading #nowhere"),
            "a missing reference target": ("[x]: docs/gone.md", "docs/gone.md does not exist"),
            "a missing script": ("```sh\n./scripts/missing.sh\n```", "scripts/missing.sh does not exist"),
            "a file a command names": ("```sh\npython3 tests/nothing.py\n```", "tests/nothing.py does not exist"),
            "an unknown subcommand": ("```sh\nshardpack frobnicate x\n```", "no such subcommand"),
            "an unknown option on a continued line": ("```sh\nshardpack build --csv x.csv \\\n    --sise 3\n```",
                                                     "no option --sise"),
        }
        faults_in_good = {  # (what, old text of the clean README, new text, expected problem)
            "a headline figure the bench file lacks": ("1,234/s, 2.5x |\n\n## After", "1,243/s, 2.5x |\n\n## After",
                                                       "1,243 is not in scripts/bench/README.md"),
        }
        failed = 0
        for what, (snippet, expected) in faults.items():
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write(good + "\n" + snippet + "\n")
            _, problems = check(root)
            if not any(expected in p for p in problems):
                print(f"self-test: {what} was not caught (got {problems})")
                failed += 1
        for what, (before, after, expected) in faults_in_good.items():
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write(good.replace(before, after))
            _, problems = check(root)
            if not any(expected in p for p in problems):
                print(f"self-test: {what} was not caught (got {problems})")
                failed += 1
        os.chmod(script, 0o644)
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write(good)
        _, problems = check(root)
        if not any("not executable" in p for p in problems):
            print(f"self-test: a script that is not executable was not caught (got {problems})")
            failed += 1
        if failed:
            return 1
        print(f"self-test: {len(faults) + len(faults_in_good) + 1} planted faults caught, the clean tree passes")
        return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    files, problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in the documentation ({len(files)} Markdown files)")
        return 1
    print(f"{len(files)} Markdown files: every relative link resolves; the commands name real files, "
          "subcommands and options")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
