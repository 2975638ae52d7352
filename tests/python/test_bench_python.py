"""The Python reading benchmark's own correctness (scripts/bench/py_read_bench.py, py_report.py):
its epoch check finds a wrong epoch, its reference tensors are the dataset's, and the report's
targets are the ratios the issue asks for, with a left-out peer's reason in place of a figure."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, run, tool

BENCH = ROOT / "scripts" / "bench"
sys.path.insert(0, str(BENCH))


@pytest.fixture(scope="module")
def cls_job(tmp_path_factory):
    """A tiny grey classification job prepared as bench.sh prepares it."""
    d = tmp_path_factory.mktemp("pybench")
    run(tool("make_sample_data"), "--out", d / "src", "--task", "cls", "--jpeg", "--count", "70",
        "--width", "48", "--height", "48", "--seed", "5")
    for comp, name in (("zstd", "zstd.ds"), ("none", "raw.ds")):
        run(tool("shardpack"), "-q", "build", "--csv", d / "src" / "list.csv", "--color", "gray", "--size", "32x32",
            "--resize", "shorter", "--crop", "center", "--compression", comp, "--out", d / name)
    run(sys.executable, BENCH / "py_read_bench.py", "prepare", "--job", "cls", "--src", d / "src",
        "--raw-ds", d / "raw.ds", "--zstd-ds", d / "zstd.ds", "--work", d / "job")
    return d


def run_method(job_dir, method):
    r = subprocess.run([sys.executable, str(BENCH / "py_read_bench.py"), "run", "--method", method, "--work",
                        str(job_dir), "--epochs", "2", "--check"], capture_output=True, text=True, timeout=300)
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    return r.returncode, (json.loads(lines[-1]) if lines else None), r.stderr


def test_prepared_tensors_are_the_datasets_records(cls_job):
    import shardpack
    ds = shardpack.open(str(cls_job / "zstd.ds"))
    images = np.load(cls_job / "job" / "tensors" / "images.npy")
    labels = np.load(cls_job / "job" / "tensors" / "labels.npy")
    assert images.shape == (70, 32, 32, 1) and labels.shape == (70,)
    for i in (0, 33, 69):
        image, label = ds[i]
        assert np.array_equal(images[i], image) and labels[i] == label


@pytest.mark.parametrize("method", ["npy_ram", "npy_dl", "sp_zstd_loader", "sp_zstd_ring", "sp_zstd_u8_ring",
                                    "sp_raw_dl", "sp_raw_batch", "sp_raw_fresh"])
def test_every_way_passes_the_epoch_check(cls_job, method):
    rc, result, err = run_method(cls_job / "job", method)
    assert rc == 0, err
    assert result["check"]["ok"] and result["samples"] == 70
    assert result["ttfb_s"] > 0 and result["samples_per_s"] > 0 and result["peak_rss_bytes"] > 0


def test_the_epoch_check_fails_on_wrong_values(cls_job, tmp_path):
    work = tmp_path / "job"
    shutil.copytree(cls_job / "job", work)
    job = json.loads((work / "job.json").read_text())
    job["image_sum"] += 0.01 * abs(job["image_sum"]) + 100  # what a wrong normalisation would give
    (work / "job.json").write_text(json.dumps(job))
    rc, result, err = run_method(work, "npy_ram")
    assert rc == 1 and result["check"]["ok"] is False and "check failed" in err


def test_report_targets_and_left_out_peers(tmp_path):
    import py_report

    def entry(method, rate, rss=400e6, base=245e6):
        return {"name": f"py.cls.{method}", "result": {
            "samples_per_s": rate, "epoch_s": [1.0], "first_epoch_s": 1.0, "ttfb_s": 0.1, "dataset_samples": 7000,
            "peak_rss_bytes": rss, "peak_anon_bytes": rss / 2, "baseline_rss_bytes": base, "processes": 1,
            "check": {"ok": True}, "round": 0}}
    lines = [entry("npy_ram", 1000, rss=800e6), entry("sp_raw_fresh", 850), entry("sp_raw_batch", 900),
             entry("sp_raw_loader", 900), entry("sp_raw_ring", 950), entry("sp_zstd_loader", 600),
             entry("sp_zstd_ring", 700), entry("sp_zstd_u8", 800), entry("sp_zstd_u8_ring", 900),
             entry("tfdata", 200), entry("wds", 400), entry("npy_dl", 500),
             {"name": "py.cls.bare_zstd", "result": {"modes": {"zstd_nt": {"samples_per_s": 1000},
                                                               "reader_nt": {"samples_per_s": 950}}}},
             {"name": "py.cls.mds", "result": {"skipped": "mosaicml-streaming could not be installed: no wheel"}}]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows, targets = py_report.build(py_report.load(str(results)))
    by = {(t["against"], t["target"]): t for t in targets}
    t = by[("sp_raw_batch", "fresh read_batch of raw records")]
    assert t["ratio"] == pytest.approx(850 / 900) and t["met"] and t["minimum"] == 0.9
    t = by[("npy_ram", "fresh read_batch of raw records")]
    assert t["ratio"] == pytest.approx(0.85) and t["met"] is False
    # The faster Loader way per kind of record: the ring here.
    t = by[("tfdata", "Loader zstd")]
    assert t["way"] == "sp_zstd_ring" and t["ratio"] == pytest.approx(3.5) and t["met"]
    t = by[("wds", "Loader zstd")]
    assert t["ratio"] == pytest.approx(1.75) and t["met"] is False and t["minimum"] == 2.0
    assert by[("wds", "Loader raw")]["ratio"] == pytest.approx(950 / 400) and by[("wds", "Loader raw")]["met"]
    assert by[("npy_dl", "Loader zstd")]["met"] is None  # shown, no target
    t = by[("bare_zstd", "uint8 delivery of zstd records")]
    assert t["way"] == "sp_zstd_u8_ring" and t["ratio"] == pytest.approx(0.9) and t["met"]
    assert not any(t["against"] == "mds" for t in targets)
    mds = [r for r in rows if r["way"] == "mds"][0]
    assert mds["status"] == "skipped" and "no wheel" in mds["reason"]
    out = subprocess.run([sys.executable, str(BENCH / "py_report.py"), str(results), "--json", str(tmp_path / "p.json"),
                          "--markdown", str(tmp_path / "p.md")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "p.md").read_text()
    assert "not measured: mosaicml-streaming could not be installed: no wheel" in md
    assert "1.75x MISSED (sp_zstd_ring)" in md and "3.50x met (sp_zstd_ring)" in md
    assert "| target: uint8 delivery of zstd records >= 0.85x against bare zstd | 0.90x met (sp_zstd_u8_ring) |" in md
