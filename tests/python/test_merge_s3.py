"""`shardpack merge` of parts on object storage (issue #34): the parts of a 4-way build --partition,
copied to SeaweedFS (scripts/remote/setup_seaweedfs.sh, tests/remote/s3_fixture.py), merged from
s3:// equal a one-machine build byte for byte (content hash, manifest.json, every shard); a
missing part or a part of another build is refused by name, as for local parts, and nothing is
published; --check checks s3:// parts; the fetched copies are removed. Skipped, with the reason,
where SeaweedFS is not installed or cannot start. About 20 s."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run, tool

sys.path.insert(0, str(ROOT / "tests" / "remote"))
import s3_fixture  # noqa: E402

WEED = os.environ.get("SHARDPACK_WEED", str(ROOT / ".venv-s3" / "bin" / "weed"))
OPTIONS = ["--size", "48x32", "--label-layout", "index", "--shard-size", "16KiB", "--shuffle", "--threads", "1"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.access(WEED, os.X_OK):
        pytest.skip(f"SeaweedFS is not installed at {WEED} (scripts/remote/setup_seaweedfs.sh needs PyPI)")
    s = s3_fixture.SeaweedServer(WEED, str(tmp_path_factory.mktemp("seaweed")))
    try:
        s.start()
    except s3_fixture.StartError as e:
        pytest.skip(f"SeaweedFS cannot start: {e}")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def env(server, tmp_path_factory):
    e = dict(os.environ, AWS_ACCESS_KEY_ID=s3_fixture.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3_fixture.SECRET_KEY,
             AWS_REGION="us-east-1", AWS_ENDPOINT_URL=server.endpoint,
             SHARDPACK_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    e.pop("AWS_PROFILE", None)
    return e


def cli(env, *args):
    r = subprocess.run([tool("shardpack"), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout + r.stderr


def copy_folder(server, folder, prefix):
    """Every file of `folder` to s3://BUCKET/prefix/, as `aws s3 cp --recursive` copies a part."""
    for f in sorted(folder.iterdir()):
        if f.is_file():
            status, body = s3_fixture.signed_request(server.ports[3], "PUT", f"/{s3_fixture.BUCKET}/{prefix}/{f.name}",
                                                     body=f.read_bytes(), timeout=30)
            assert status == 200, (f, status, body[:200])


@pytest.fixture(scope="module")
def builds(server, env, tmp_path_factory):
    """A one-machine build and the parts of two 4-way builds (seeds 7 and 8), each part's folder
    copied to object storage; one more part pushed with `shardpack push` (shards and manifest only)."""
    root = tmp_path_factory.mktemp("parts")
    run(tool("make_sample_data"), "--out", root / "data", "--count", 24, "--width", 96, "--height", 64)
    common = ["--csv", root / "data" / "list.csv", "--classes", root / "data" / "class_dict.csv", *OPTIONS]
    run(tool("shardpack"), "-q", "build", "--out", root / "single", *common, "--seed", 7)
    for seed in (7, 8):
        for k in range(4):
            part = root / f"seed{seed}" / f"part-{k:05d}"
            run(tool("shardpack"), "-q", "build", "--out", part, *common, "--seed", seed, "--partition", f"{k}/4")
            copy_folder(server, part, f"m34/seed{seed}/part-{k:05d}")
    code, out = cli(env, "-q", "push", root / "seed7" / "part-00002", f"s3://{s3_fixture.BUCKET}/m34/pushed/part-00002")
    assert code == 0, out
    return root


def same_dataset(a, b):
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()
    shards = sorted(p.name for p in a.glob("shard-*.spk"))
    assert len(shards) > 1 and shards == sorted(p.name for p in b.glob("shard-*.spk"))
    for name in shards:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_merge_from_object_storage_equals_a_one_machine_build(env, builds, tmp_path):
    prefix = f"s3://{s3_fixture.BUCKET}/m34/seed7"
    code, out = cli(env, "merge", "--json", "--out", tmp_path / "merged", prefix)
    assert code == 0, out
    same_dataset(builds / "single", tmp_path / "merged")
    assert not (tmp_path / "merged.fetched-parts").exists()  # the fetched copies are gone
    # Parts named one by one, in any order; into a --fetch-dir of one's own.
    urls = [f"{prefix}/part-{k:05d}" for k in (2, 0, 3, 1)]
    code, out = cli(env, "-q", "merge", "--out", tmp_path / "merged2", "--fetch-dir", tmp_path / "f", *urls)
    assert code == 0, out
    same_dataset(builds / "single", tmp_path / "merged2")
    assert not (tmp_path / "f").exists()
    code, out = cli(env, "-q", "merge", "--check", "--fetch-dir", tmp_path / "c", prefix)
    assert code == 0, out


def test_a_missing_or_foreign_part_is_refused_by_name(env, builds, tmp_path):
    base = f"s3://{s3_fixture.BUCKET}/m34"
    three = [f"{base}/seed7/part-{k:05d}" for k in (0, 1, 3)]
    code, out = cli(env, "merge", "--out", tmp_path / "missing", *three)
    assert code == 1 and "missing part 2 of 4" in out, out
    assert not (tmp_path / "missing" / "manifest.json").exists() and not (tmp_path / "missing.fetched-parts").exists()
    foreign = three + [f"{base}/seed8/part-00002"]
    code, out = cli(env, "merge", "--out", tmp_path / "foreign", *foreign)
    assert code == 1 and "part-00002" in out and "not of the same build" in out, out
    assert not (tmp_path / "foreign" / "manifest.json").exists()
    # A part sent with `shardpack push` lacks the part's fingerprints.tsv: said, with what to do.
    pushed = three + [f"{base}/pushed/part-00002"]
    code, out = cli(env, "merge", "--out", tmp_path / "pushed", *pushed)
    assert code == 1 and "fingerprints.tsv" in out and "cp --recursive" in out, out


def test_bad_uses_are_usage_errors(env, builds, tmp_path):
    url = f"s3://{s3_fixture.BUCKET}/m34/seed7"
    code, out = cli(env, "merge", "--check", url)
    assert code == 2 and "--fetch-dir" in out, out
    code, out = cli(env, "merge", "--out", tmp_path / "m", url, builds / "seed7" / "part-00000")
    assert code == 2 and "not both" in out, out
    code, out = cli(env, "merge", "--out", tmp_path / "m", "--fetch-dir", tmp_path / "f", builds / "seed7")
    assert code == 2 and "--fetch-dir is for" in out, out
    code, out = cli(env, "merge", "--out", tmp_path / "m", f"s3://{s3_fixture.BUCKET}/m34/nothing-here")
    assert code == 1 and "not a part" in out, out
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("mine")
    code, out = cli(env, "merge", "--out", tmp_path / "m", "--fetch-dir", tmp_path / "busy", url)
    assert code == 2 and "not empty" in out, out
    assert (tmp_path / "busy" / "x").read_text() == "mine"  # left alone
