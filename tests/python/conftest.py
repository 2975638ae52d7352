"""Fixtures for the Python package's tests: small datasets built with the project's own tools.

The tools come from the CMake build: $SHARDPACK_BUILD_DIR (scripts/test.sh sets it), else
build/. A missing tool fails the tests that need it (it is not a reason to skip)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # pngread, and test modules under spawn


def build_dir():
    d = pathlib.Path(os.environ.get("SHARDPACK_BUILD_DIR", "build"))
    return d if d.is_absolute() else ROOT / d


def tool(name):
    path = build_dir() / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build the project first (scripts/build.sh) or set SHARDPACK_BUILD_DIR")
    return str(path)


def run(*args, timeout=300):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


class Built:
    """The datasets of one test session: name -> folder, and the sources they came from."""

    def __init__(self, root):
        self.root = root
        self.paths = {}
        seg = root / "src-seg"
        cls = root / "src-cls"
        run(tool("make_sample_data"), "--out", seg, "--count", 10, "--width", 40, "--height", 30, "--palette-masks")
        run(tool("make_sample_data"), "--out", cls, "--task", "cls", "--jpeg", "--count", 12, "--width", 48,
            "--height", 40)
        self.class_dict = seg / "class_dict.csv"
        segment = ["--csv", seg / "list.csv", "--classes", self.class_dict, "--size", "32x24"]
        self.build("onehot", *segment, "--shard-size", "16KiB")  # several shards
        self.build("index", *segment, "--label-layout", "index")
        self.build("raw", *segment, "--compression", "none")
        self.build("raw-index", *segment, "--compression", "none", "--label-layout", "index")
        self.build("cls", "--csv", cls / "list.csv", "--size", "24x20")
        self.build("cls-raw", "--csv", cls / "list.csv", "--size", "24x20", "--compression", "none", "--color", "gray")

    def build(self, name, *options):
        out = self.root / name
        run(tool("shardpack"), "-q", "build", "--out", out, *options)
        self.paths[name] = str(out)

    def __getitem__(self, name):
        return self.paths[name]

    def copy(self, name, dest):
        """A private copy of a dataset, for tests that damage it."""
        shutil.copytree(self.paths[name], dest)
        return str(dest)


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return Built(tmp_path_factory.mktemp("datasets"))


@pytest.fixture(scope="session")
def big(tmp_path_factory):
    """100,000 classification records of 8x8 pixels: 100 small images listed 1,000 times each
    (the build takes seconds; keys repeat, records are independent)."""
    root = tmp_path_factory.mktemp("big")
    run(tool("make_sample_data"), "--out", root / "src", "--task", "cls", "--count", 100, "--width", 16, "--height",
        16)
    rows = (root / "src" / "list.csv").read_text().splitlines()[1:]
    with open(root / "src" / "list100k.csv", "w") as f:
        f.write("image,label\n")
        for i in range(100_000):
            f.write(rows[i % len(rows)] + "\n")
    out = root / "ds"
    run(tool("shardpack"), "-q", "build", "--csv", root / "src" / "list100k.csv", "--out", out, "--size", "8x8",
        timeout=600)
    return str(out)


def cpp_dump(path):
    """dump_dataset's JSON lines: what the C++ reader reads (keys, class ids, CRC-32 of the
    image and label bytes)."""
    return [json.loads(line) for line in run(tool("dump_dataset"), path).splitlines()]


def class_colors(class_dict):
    rows = pathlib.Path(class_dict).read_text().splitlines()
    head = rows[0].split(",")
    ri, gi, bi = head.index("r"), head.index("g"), head.index("b")
    return np.array([[int(c.split(",")[i]) for i in (ri, gi, bi)] for c in rows[1:] if c], dtype=np.uint8)
