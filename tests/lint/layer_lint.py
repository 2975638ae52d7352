#!/usr/bin/env python3
"""The layer lint (issue #35): src/README.md's table of layers is the rule, and this checks the code
against it. Every folder of src/ (and each file directly in src/) must be in a row of the table,
and every `#include "..."` of a file in src/ must name its own folder or a folder of a lower
layer. Exceptions are listed, each with its reason, in layer_allow.txt beside this script, as
`src/FILE -> INCLUDED  # reason`.

  layer_lint.py ROOT           check the tree at ROOT
  layer_lint.py --self-test    check that planted faults are caught
"""
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROW = re.compile(r"^\|\s*(\d+)\s*\|(.*?)\|")
NAME = re.compile(r"`([^`]+)`")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layers_of(readme):
    """{unit: layer}: a unit is a folder of src/ ("cli"), a file of src/ ("errors.hpp"), or
    "shardpack" for ../include/shardpack/, read from the table's rows."""
    layers = {}
    for line in readme.read_text().splitlines():
        m = ROW.match(line)
        if not m:
            continue
        for name in NAME.findall(m.group(2)):
            unit = "shardpack" if name.startswith("../include/shardpack") else name.rstrip("/")
            layers[unit] = int(m.group(1))
    return layers


def allowed_of(path):
    allowed = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            source, _, target = (x.strip() for x in line.partition("->"))
            allowed.add((source, target))
    return allowed


def lint(root, allow_path):
    src = root / "src"
    layers = layers_of(src / "README.md")
    allowed = allowed_of(allow_path)
    problems = []
    for entry in sorted(src.iterdir()):
        if entry.name == "README.md" or entry.name.startswith("."):
            continue
        unit = entry.name
        if unit not in layers:
            problems.append(f"src/{unit}: in no row of src/README.md's table of layers (add it there)")
    for path in sorted(p for p in src.rglob("*") if p.suffix in (".cpp", ".hpp", ".h", ".c")):
        rel = path.relative_to(src)
        if len(rel.parts) == 1:
            continue  # a file directly in src/ includes only the standard library (checked below)
        unit = rel.parts[0]
        mine = layers.get(unit)
        if mine is None:
            continue  # reported above
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            first = target.split("/", 1)[0] if "/" in target else target
            if "/" not in target and not (src / target).exists():
                continue  # a file of its own folder (or of the build), included by its bare name
            theirs = layers.get(first)
            where = f"src/{rel}:{number}"
            if theirs is None:
                problems.append(f"{where}: includes \"{target}\", whose folder is in no row of src/README.md")
            elif first != unit and theirs >= mine and (f"src/{rel}", target) not in allowed:
                problems.append(f"{where}: {unit}/ (layer {mine}) includes \"{target}\" (layer {theirs}): "
                                "a layer includes only those below it")
    for source, target in sorted(allowed):
        path = root / source
        if not path.exists() or f'"{target}"' not in path.read_text(errors="replace"):
            problems.append(f"{allow_path.name}: {source} -> {target} is listed but no longer there (remove the line)")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        src = root / "src"
        for d in ("low", "high"):
            (src / d).mkdir(parents=True)
        (src / "README.md").write_text("| layer | folder |\n|---|---|\n| 3 | `high/` |\n| 2 | `low/` |\n| 1 | `base.hpp` |\n")
        (src / "base.hpp").write_text("#include <cstdint>\n")
        (src / "low" / "a.hpp").write_text('#include "base.hpp"\n#include "low/b.hpp"\n#include "own.hpp"\n')
        (src / "high" / "h.cpp").write_text('#include "low/a.hpp"\n')
        allow = root / "allow.txt"
        allow.write_text("")
        status = 0
        if lint(root, allow):
            print("self-test FAILED: a clean tree reported:", lint(root, allow))
            status = 1
        faults = {
            "an upward include": ("low/up.cpp", '#include "high/h.hpp"\n', "includes \"high/h.hpp\""),
            "a folder in no row": ("extra/x.cpp", "\n", "src/extra: in no row"),
            "an include of an unknown folder": ("low/u.cpp", '#include "nowhere/x.hpp"\n', "in no row of src/README.md"),
        }
        for what, (rel, text, expect) in faults.items():
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            out = "\n".join(lint(root, allow))
            if expect not in out:
                print(f"self-test FAILED: {what} not caught: {out!r}")
                status = 1
            path.unlink()
            if not any(path.parent.iterdir()) and path.parent.name == "extra":
                path.parent.rmdir()
        (src / "low" / "up.cpp").write_text('#include "high/h.hpp"\n')
        allow.write_text("src/low/up.cpp -> high/h.hpp  # the reason\n")
        if lint(root, allow):
            print("self-test FAILED: an allowed include reported:", lint(root, allow))
            status = 1
        (src / "low" / "up.cpp").unlink()
        if not any("no longer there" in p for p in lint(root, allow)):
            print("self-test FAILED: a stale allow-list line not reported")
            status = 1
    if status == 0:
        print(f"layer_lint self-test: {len(faults) + 1} planted faults caught, the clean and allowed trees pass")
    return status


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print("usage: layer_lint.py ROOT | --self-test", file=sys.stderr)
        return 2
    problems = lint(pathlib.Path(sys.argv[1]), HERE / "layer_allow.txt")
    for p in problems:
        print(p)
    if problems:
        print("layer_lint: move the code to its layer, or list the include in tests/lint/layer_allow.txt with the reason")
        return 1
    print("layer_lint: every include of src/ goes down src/README.md's table of layers (and the allow-list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
