"""shardpack.open("s3://...") against a real server: SeaweedFS (`weed mini`, from
scripts/remote/setup_seaweedfs.sh) on 127.0.0.1 with its data in a temporary folder, and the
fault proxy of tests/remote/s3_fixture.py. Skipped, with the reason, where SeaweedFS is not
installed or cannot start, or the extension was built without libcurl. About 15 s. The last two
tests, libcurl's loading, need no server."""
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import shardpack
from conftest import ROOT, run, tool

sys.path.insert(0, str(ROOT / "tests" / "remote"))
import s3_fixture  # noqa: E402

WEED = os.environ.get("SHARDPACK_WEED", str(ROOT / ".venv-s3" / "bin" / "weed"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.access(WEED, os.X_OK):
        pytest.skip(f"SeaweedFS is not installed at {WEED} (scripts/remote/setup_seaweedfs.sh needs PyPI)")
    folder = tmp_path_factory.mktemp("seaweed")
    s = s3_fixture.SeaweedServer(WEED, str(folder))
    try:
        s.start()
    except s3_fixture.StartError as e:
        pytest.skip(f"SeaweedFS cannot start: {e}")
    proxy = s3_fixture.FaultProxy(s.ports[3])
    s.proxy = proxy
    yield s
    proxy.close()
    s.stop()


@pytest.fixture()
def env(server, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_fixture.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_fixture.SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("SHARDPACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SHARDPACK_S3_MAX_ATTEMPTS", "4")
    monkeypatch.setenv("SHARDPACK_S3_DEADLINE_MS", "10000")
    return server


def push(path, url):
    run(tool("shardpack"), "-q", "push", path, url, timeout=120)


def remote_or_skip(url, io="pread"):
    """Opened with io="pread" by default: these tests count the S3 storage's own reads (a ranged GET
    per shard of a batch, its disk cache, its retries); io="auto" reads through the reader's I/O
    engine instead (test_auto_streams_...)."""
    try:
        return shardpack.open(url, io=io)
    except shardpack.Error as e:
        if "remote library" in str(e):
            pytest.skip("this build of the extension has no libcurl (s3:// URLs): " + str(e))
        raise


def test_every_record_equals_the_local_one(env, built):
    url = f"s3://{s3_fixture.BUCKET}/py/onehot"
    push(built["onehot"], url)
    remote = remote_or_skip(url)
    local = shardpack.open(built["onehot"])
    assert len(remote) == len(local)
    for i in range(len(local)):
        (ri, rl), (li, ll) = remote[i], local[i]
        assert remote.key(i) == local.key(i)
        np.testing.assert_array_equal(ri, li)
        np.testing.assert_array_equal(rl, ll)
    idx = np.array([5, 0, 9, 3, 3, 7], dtype=np.int64)
    rb, rlab = remote.read_batch(idx, dtype="uint8")
    lb, llab = local.read_batch(idx, dtype="uint8")
    np.testing.assert_array_equal(rb, lb)
    np.testing.assert_array_equal(rlab, llab)


def test_faults_retry_or_name_the_shard_and_record(env, built, monkeypatch):
    url = f"s3://{s3_fixture.BUCKET}/py/index"
    push(built["index"], url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", env.proxy.endpoint)
    local = shardpack.open(built["index"])
    idx = np.arange(len(local), dtype=np.int64)
    want, _ = local.read_batch(idx, dtype="uint8")
    remote_or_skip(url).read_batch(idx, dtype="uint8")  # every head and index into the disk cache: the reads below GET only records
    for mode in ("503", "truncate", "badrange"):
        remote = remote_or_skip(url)
        env.proxy.set_fault(mode, 2)
        before = env.proxy.ranged_gets
        got, _ = remote.read_batch(idx, dtype="uint8")
        np.testing.assert_array_equal(got, want)
        assert env.proxy.ranged_gets - before >= 3  # the faulted GETs and their retries
        env.proxy.clear()
    remote = remote_or_skip(url)
    env.proxy.set_fault("503", 1000)
    t0 = time.monotonic()
    with pytest.raises(shardpack.Error, match=r"\.spk: record \d+ \(dataset index \d+\).*503 SlowDown"):
        remote.read_batch(idx, dtype="uint8")
    assert time.monotonic() - t0 < 15
    env.proxy.clear()


def many_shards(tmp_path, count=60):
    """A dataset of a record or two per shard (about `count` / 1.5 shards)."""
    src, out = tmp_path / "src", tmp_path / "many"
    run(tool("make_sample_data"), "--out", src, "--count", count, "--width", 32, "--height", 24)
    run(tool("shardpack"), "-q", "build", "--out", out, "--csv", src / "list.csv", "--classes", src / "class_dict.csv",
        "--size", "32x24", "--shard-size", "4KiB")
    return str(out)


def test_open_is_lazy_and_a_first_batch_gets_only_its_shards(env, tmp_path, monkeypatch):
    folder = many_shards(tmp_path)
    url = f"s3://{s3_fixture.BUCKET}/py/many"
    push(folder, url)
    local = shardpack.open(folder)
    starts = np.asarray(local.shard_starts, dtype=np.int64)
    assert len(starts) >= 20
    monkeypatch.setenv("AWS_ENDPOINT_URL", env.proxy.endpoint)
    monkeypatch.setenv("SHARDPACK_S3_HEDGE_PERCENTILE", "0")  # GETs counted exactly: no hedged duplicates
    before = env.proxy.ranged_gets
    remote = remote_or_skip(url)
    assert env.proxy.ranged_gets - before == 1  # shard 0, whole (manifest.json is a plain GET)
    idx = starts[1::len(starts) // 8][:8]  # the first record of 8 shards spread over the dataset
    before = env.proxy.ranged_gets
    got = remote.read_batch(idx, dtype="uint8")
    assert env.proxy.ranged_gets - before == len(idx)  # one GET per shard: head, index and records
    want = local.read_batch(idx, dtype="uint8")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # Opened again (same disk cache): nothing but the manifest before the records are read.
    before = env.proxy.ranged_gets
    again = remote_or_skip(url)
    assert env.proxy.ranged_gets - before == 0
    got = again.read_batch(idx, dtype="uint8")
    assert env.proxy.ranged_gets - before == len(idx)  # the records, one range per shard
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # A shard that cannot be fetched: a shardpack.Error naming it and the reason, bounded in time.
    monkeypatch.setenv("SHARDPACK_CACHE_DIR", str(tmp_path / "cold-cache"))
    cold = remote_or_skip(url)
    env.proxy.set_fault("503", 1000)
    t0 = time.monotonic()
    with pytest.raises(shardpack.Error, match=r"shard-\d+-[0-9a-f]{16}\.spk.*503 SlowDown"):
        cold.read_batch(idx, dtype="uint8")
    assert time.monotonic() - t0 < 15
    env.proxy.clear()


def test_auto_streams_a_dataset_that_fits_each_byte_fetched_once(env, built, monkeypatch):
    """io="auto" (the default) over S3: a dataset that fits the cache is streamed by the reader's
    I/O engine, whole shards in ranged GETs, each byte once; every record equals the local one in
    a shuffled batch, and a second pass fetches nothing."""
    url = f"s3://{s3_fixture.BUCKET}/py/stream"
    push(built["onehot"], url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", env.proxy.endpoint)
    monkeypatch.setenv("SHARDPACK_S3_HEDGE_PERCENTILE", "0")  # GETs counted exactly: no hedged duplicates
    remote = remote_or_skip(url, io="auto")
    assert (remote.io, remote.preferred_order) == ("stream", "global")
    local = shardpack.open(built["onehot"])
    idx = shardpack.permutation(len(local), 7)
    before = env.proxy.ranged_gets
    got = remote.read_batch(idx, dtype="uint8")
    for g, w in zip(got, local.read_batch(idx, dtype="uint8")):
        np.testing.assert_array_equal(g, w)
    first = env.proxy.ranged_gets - before
    shards = len(remote.shard_starts)
    assert 1 <= first <= shards * (1 + remote.data_bytes // (4 << 20) + 1)
    assert remote.io_counters()["extent_bytes"] == remote.data_bytes  # each byte once
    before = env.proxy.ranged_gets
    again = remote.read_batch(idx[::-1].copy(), dtype="uint8")
    assert env.proxy.ranged_gets == before  # from the reader's memory
    np.testing.assert_array_equal(again[0], got[0][::-1])


def test_torch_loader_blocks_order_from_the_server_equals_local(env, tmp_path):
    torch_loader = pytest.importorskip("shardpack.torch", reason="torch is not installed").Loader
    folder = many_shards(tmp_path, count=120)
    url = f"s3://{s3_fixture.BUCKET}/py/loader"
    push(folder, url)
    remote_or_skip(url)
    # The Loader announces whole blocks ahead (dataset.prefetch); from the server they are GETs
    # of block ranges (or of whole small shards), each read once, the batches exact.
    kw = dict(batch_size=16, seed=3, order="blocks", block=6, window=4, dtype="uint8", label="index", threads=2)
    for epoch in range(2):
        remote = torch_loader(url, **kw)
        local = torch_loader(folder, **kw)
        remote.set_epoch(epoch)
        local.set_epoch(epoch)
        n = 0
        for (ri, rl), (li, ll) in zip(remote, local):
            assert torch_equal(ri, li) and torch_equal(rl, ll)
            n += len(ri)
        assert n == len(shardpack.open(folder))


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())



def folder_bytes(folder):
    return {p.name: p.read_bytes() for p in pathlib.Path(folder).iterdir()}


def test_a_content_hash_changed_in_transit_is_refused_naming_the_manifest(env, built):
    """The manifest's content_hash is checked against the shards' hashes it is computed from
    (spec 13.2) at open: a changed one is an error naming manifest.json, not a wrong identity."""
    url = f"s3://{s3_fixture.BUCKET}/py/chash"
    push(built["index"], url)
    good = remote_or_skip(url).content_hash
    key = f"/{s3_fixture.BUCKET}/py/chash/manifest.json"
    status, text = s3_fixture.signed_request(env.ports[3], "GET", key)
    assert status == 200
    changed = text.replace(good.encode(), (("1" if good[0] == "0" else "0") + good[1:]).encode())
    assert changed != text
    status, _ = s3_fixture.signed_request(env.ports[3], "PUT", key, body=changed)
    assert status == 200
    with pytest.raises(shardpack.Error, match=r"manifest\.json: content_hash .*" + good):
        shardpack.open(url)


def test_the_shard_cache_refuses_a_folder_it_did_not_make(env, built, tmp_path, monkeypatch):
    """$SHARDPACK_CACHE_DIR/shards holding a user's dataset (shard-*.spk files) is not the
    whole-shard cache's: opening refuses it, naming it, and none of its files is removed."""
    url = f"s3://{s3_fixture.BUCKET}/py/owncache"
    push(built["onehot"], url)
    data = tmp_path / "data"
    shutil.copytree(built["index"], data / "shards")
    before = folder_bytes(data / "shards")
    largest = max(p.stat().st_size for p in pathlib.Path(built["onehot"]).glob("shard-*.spk"))
    monkeypatch.setenv("SHARDPACK_CACHE_DIR", str(data))
    monkeypatch.setenv("SHARDPACK_SHARD_CACHE_BYTES", str(largest + 1))  # one shard at a time: each new one would evict
    with pytest.raises(shardpack.Error, match="not a shardpack cache") as e:
        remote = shardpack.open(url)
        remote.read_batch(np.arange(len(remote), dtype=np.int64), dtype="uint8")
    if "remote library" in str(e.value):
        pytest.skip("this build of the extension has no libcurl (s3:// URLs): " + str(e.value))
    assert str(data / "shards") in str(e.value)
    assert folder_bytes(data / "shards") == before


# No server: fresh interpreters, so nothing earlier in this process has loaded libcurl. About 1 s.
LIBCURL_PROBE = """
import shardpack

def libcurl_loaded():
    with open("/proc/self/maps") as maps:
        return any("/libcurl" in line for line in maps)

print("import", libcurl_loaded())
try:
    shardpack.open("s3://bucket/ds")
except shardpack.Error as e:
    print("error", e)
print("open", libcurl_loaded())
"""


def libcurl_probe(tmp_path, **extra):
    """LIBCURL_PROBE's three lines, with credentials and an endpoint where nothing listens."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc/self/maps here to see which libraries are loaded")
    environment = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                       AWS_ENDPOINT_URL_S3="http://127.0.0.1:9", SHARDPACK_S3_MAX_ATTEMPTS="1",
                       SHARDPACK_CACHE_DIR=str(tmp_path / "cache"), **extra)
    r = subprocess.run([sys.executable, "-c", LIBCURL_PROBE], env=environment, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    if "remote library" in out[1]:
        pytest.skip("the extension was built without libcurl (s3:// URLs are an error)")
    return out


def test_libcurl_is_loaded_by_the_first_s3_open_not_by_import(tmp_path):
    """libcurl is opened (dlopen) at the first s3:// open, not linked: `import shardpack` (every
    DataLoader worker) does not load it and its libraries (issue #22)."""
    out = libcurl_probe(tmp_path)
    assert out[0] == "import False"
    assert out[1].startswith("error ") and "curl:" in out[1], out[1]  # nothing listens on port 9
    assert out[2] == "open True"


def test_without_libcurl_an_s3_open_is_a_clear_error(tmp_path):
    """Where libcurl cannot be loaded (hidden from dlopen by the test shim of
    tests/fault_inject/no_libcurl.c), opening s3:// raises shardpack.Error naming it."""
    out = libcurl_probe(tmp_path, LD_PRELOAD=tool("tests/libshardpack_no_libcurl.so"), SHARDPACK_NO_LIBCURL="hide")
    assert out[0] == "import False"
    assert out[1].startswith("error libcurl: cannot load libcurl") and "hidden by the test" in out[1], out[1]
    assert out[2] == "open False"
