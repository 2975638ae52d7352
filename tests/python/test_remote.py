"""shardpack.open("s3://...") against a real server: SeaweedFS (`weed mini`, from
scripts/remote/setup_seaweedfs.sh) on 127.0.0.1 with its data in a temporary folder, and the
fault proxy of tests/remote/s3_fixture.py. Skipped, with the reason, where SeaweedFS is not
installed or cannot start, or the extension was built without libcurl. About 10 s."""
import os
import pathlib
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


def remote_or_skip(url):
    try:
        return shardpack.open(url)
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
    remote_or_skip(url)  # heads and indexes into the disk cache: the opens below GET only records
    local = shardpack.open(built["index"])
    idx = np.arange(len(local), dtype=np.int64)
    want, _ = local.read_batch(idx, dtype="uint8")
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
