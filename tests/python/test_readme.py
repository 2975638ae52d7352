"""README.md's examples run as written (#20 item 1): the command-line block and the Python block,
on sample data in a scratch folder, with the built `shardpack`.

Not run here, each for its reason:
- `./scripts/demo.sh`, `./scripts/test.sh`, `./scripts/build.sh`, `./scripts/python-env.sh`,
  `cmake --install`: they install and build (test.sh is what runs this test; CI runs test.sh on a
  fresh machine, and demo.sh is its first command). tests/check_docs.py (ctest `docs_links`) checks
  that each script exists and is executable.
- the C++ block: a fragment (`i`, `indices`, `out`, `ctx` are the reader's own words, declared in
  reader.hpp's usage block); tests/consumer (ctest `consumer_package`) builds a whole program
  against the installed header."""
import json
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT, run, tool

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(kind):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text) if lang == kind]


def command_lines(body):
    """The shell block's commands: continued lines joined, comments dropped, split as the shell
    would."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if shlex.split(line, comments=True)]


def cli_block():
    found = [b for b in blocks("bash") + blocks("sh") + blocks("") if re.search(r"^shardpack ", b, re.M)]
    assert found, "README.md has no code block of shardpack commands"
    return found[0]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The README's inputs: list.csv and class_dict.csv in the working folder. 12 records, as the
    Python example reads record 9; 640x480 photos and color masks, so that --size 512x512
    --resize shorter scales them up and crops."""
    root = tmp_path_factory.mktemp("readme")
    run(tool("make_sample_data"), "--out", root / "work", "--count", 12, "--width", 640, "--height", 480)
    return root / "work"


def test_the_command_line_examples_run_as_written(sample):
    commands = command_lines(cli_block())
    assert [c[:2] for c in commands] == [["shardpack", "build"], ["shardpack", "verify"], ["shardpack", "export"]]
    for argv in commands:
        r = subprocess.run([tool("shardpack")] + argv[1:], cwd=sample, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"README command {shlex.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    # What the comments say they make.
    assert (sample / "data" / "train" / "manifest.json").is_file()
    assert (sample / "check" / "s0.image.png").is_file() and (sample / "check" / "s0.label.png").is_file()


def test_the_python_example_runs_as_written(sample):
    pytest.importorskip("torch", reason="the README's Python example uses shardpack.torch (PyTorch not installed)")
    if not (sample / "data" / "train" / "manifest.json").exists():
        for argv in command_lines(cli_block())[:1]:
            subprocess.run([tool("shardpack")] + argv[1:], cwd=sample, check=True, capture_output=True, timeout=300)
    (code,) = [b for b in blocks("python") if "import shardpack" in b][:1]
    # Run in a child with the sample as its working folder ("data/train" is relative), the
    # Loader's epoch included; the child reports what the example's names hold.
    probe = ("\nimport json, sys\n"
             "json.dump({'len': len(ds), 'img': list(img.shape), 'images': list(images.shape),"
             " 'labels': list(labels.shape)}, sys.stdout)\n")
    r = subprocess.run([sys.executable, "-c", code + probe], cwd=sample, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"README's Python example failed:\n{r.stderr}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["len"] == 12
    assert got["img"] == [512, 512, 3]
    # After the loop: the last Loader batch (12 records, batch_size 64: one batch of 12).
    assert got["images"][0] == 12 and got["images"][1:] == [3, 512, 512]
    assert got["labels"][0] == 12
