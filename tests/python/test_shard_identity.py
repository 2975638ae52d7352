"""A shard file replaced after open by another valid shard (issue #30, item 1): shardpack.write
lists each shard's trailer checksum (manifest "index_xxh3", format 1.6) and shardpack.open's
reader refuses a replaced shard at its first read, naming it, however lazily it opens shards."""
import json
import os
import shutil

import numpy as np
import pytest

import shardpack


def _write(path: str, offset: int) -> None:
    """6 raw 40x40 RGB records (4.8 kB), one a shard; `offset` changes every pixel, never a size."""
    samples = [(f"k{i}", np.full((40, 40, 3), (i * 10 + offset) % 256, np.uint8), i % 2) for i in range(6)]
    shardpack.write(path, samples, task="cls", classes=["a", "b"], compression="none", shard_size=4096, quiet=True)


def _replace(path: str, twin: str, k: int) -> None:
    """Renames a copy of the twin's shard k over `path`'s (the twin's is named by its own hash)."""
    name = json.load(open(os.path.join(path, "manifest.json")))["shards"][k]["file"]
    other = json.load(open(os.path.join(twin, "manifest.json")))["shards"][k]
    assert other["file"] != name and other["bytes"] == os.path.getsize(os.path.join(path, name))
    tmp = os.path.join(path, ".replacement")
    shutil.copyfile(os.path.join(twin, other["file"]), tmp)
    os.replace(tmp, os.path.join(path, name))


@pytest.mark.parametrize("io", ["mmap", "pread", "blocks"])
def test_a_shard_replaced_after_a_lazy_open_is_refused_naming_it(tmp_path, io):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _write(a, 0)
    _write(b, 7)
    shards = json.load(open(os.path.join(a, "manifest.json")))["shards"]
    assert len(shards) >= 3
    for s in shards:  # the writer lists each shard's trailer checksum
        data = open(os.path.join(a, s["file"]), "rb").read()
        assert s["index_xxh3"] == data[-24:-16][::-1].hex()
    ds = shardpack.open(a, max_open_shards=1, io=io)
    k = 2
    first = shards[k]["first_record"]
    assert ds[first][0][0, 0, 0] == (first * 10) % 256  # read as listed, then closed by the next
    ds[0]
    _replace(a, b, k)
    with pytest.raises(shardpack.Error, match=shards[k]["file"] + r".*is not the file the manifest lists"):
        ds[first]


def test_a_manifest_without_index_xxh3_reads_as_before(tmp_path):
    a = str(tmp_path / "a")
    _write(a, 0)
    path = os.path.join(a, "manifest.json")
    m = json.load(open(path))
    for s in m["shards"]:
        del s["index_xxh3"]
    json.dump(m, open(path, "w"))
    ds = shardpack.open(a, max_open_shards=1)
    assert [int(ds[i][0][0, 0, 0]) for i in range(len(ds))] == [(i * 10) % 256 for i in range(6)]
