"""shardpack.open and read_batch against hostile files in each role (issue #18, the Python rows
of tests/test_hostile_files.cpp's table): a FIFO, a device, a folder or a huge sparse file where
the manifest or a shard belongs, and a shard replaced by a FIFO after open. Each case runs in a
child process under a time limit, so a hang fails instead of stalling the suite; it must end in
a shardpack.Error naming the file (or, for the shard replaced after open, the right bytes),
within the time and memory bounds. Takes a few seconds."""
import json
import os
import resource
import subprocess
import sys

import pytest

TIME_LIMIT_S = 20
RSS_LIMIT_MIB = 600  # the interpreter, numpy and the extension; far below a read of the 4 GiB file

CHILD = r"""
import json, sys
import numpy as np
import shardpack
path, mode = sys.argv[1], sys.argv[2]
try:
    ds = shardpack.open(path)
    if mode == "replace-shard":
        import os
        first = ds.read_batch(np.arange(len(ds)), dtype="uint8", layout="NHWC", label="stored", normalize=None)
        shard = sorted(f for f in os.listdir(path) if f.endswith(".spk"))[0]
        os.rename(os.path.join(path, shard), os.path.join(path, shard + ".moved"))
        os.mkfifo(os.path.join(path, shard))
        again = ds.read_batch(np.arange(len(ds)), dtype="uint8", layout="NHWC", label="stored", normalize=None)
        same = all(np.array_equal(a, b) for a, b in zip(first, again))
        print(json.dumps({"ok": True, "same": bool(same)}))
    else:
        ds.read_batch(np.arange(len(ds)), dtype="uint8", layout="NHWC", label="stored", normalize=None)
        print(json.dumps({"ok": True}))
except shardpack.Error as e:
    print(json.dumps({"ok": False, "error": str(e), "type": type(e).__name__}))
"""


def plant(kind, path):
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)
    elif os.path.lexists(path):
        os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o644 | 0o020000, os.makedev(1, 5))
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(4 << 30)


def run_child(path, mode="read"):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run([sys.executable, "-c", CHILD, path, mode], capture_output=True, text=True, timeout=TIME_LIMIT_S)
    rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert r.returncode == 0, r.stderr
    assert rss_mib < RSS_LIMIT_MIB or before / 1024 >= RSS_LIMIT_MIB, f"peak RSS {rss_mib:.0f} MiB"
    return json.loads(r.stdout.strip().splitlines()[-1])


# A sparse 4 GiB shard is not here: a shard of the wrong size is the reader's format check (its
# size against the index), not a file-kind one; a sparse manifest is the size bound's case.
@pytest.mark.parametrize("role,kind", [("manifest.json", k) for k in ("fifo", "device", "folder", "sparse")] +
                         [("shard", k) for k in ("fifo", "device", "folder")])
def test_open_and_read_batch_refuse_a_hostile_file_naming_it(built, tmp_path, role, kind):
    ds = built.copy("onehot", tmp_path / "ds")
    name = "manifest.json" if role == "manifest.json" else sorted(f for f in os.listdir(ds) if f.endswith(".spk"))[0]
    plant(kind, os.path.join(ds, name))
    result = run_child(ds)
    assert not result["ok"], result
    assert name in result["error"], result


def test_read_batch_after_a_shard_is_replaced_by_a_fifo_gives_the_same_bytes_or_an_error(built, tmp_path):
    ds = built.copy("onehot", tmp_path / "ds")
    result = run_child(ds, "replace-shard")
    if result["ok"]:
        assert result["same"], "read_batch returned other bytes after the shard was replaced"
    else:
        assert ".spk" in result["error"], result
