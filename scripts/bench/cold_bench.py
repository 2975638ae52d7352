#!/usr/bin/env python3
"""The cold-storage benchmark (scripts/bench.sh --cold): the first epoch of a dataset that is not
in the page cache, in each order, against the floor (the dataset's bytes at the disk's
sequential rate, measured in the same run with O_DIRECT), on this machine's disk and on a
simulated mechanical disk (tests/fault_inject/slow_disk.c under LD_PRELOAD), and a user's .npy
preload (np.load of the whole array, then indexing) on the same disks.

  cold_bench.py prepare --bin BIN --work W [--records N]   the dataset and its .npy copy
  cold_bench.py drive --work W --shim SO [--reps R] [--seek-ms 8] [--mbps 150] [--results F]
                [--json OUT] [--markdown OUT]
  cold_bench.py run --work W --method M [--io IO]          one first epoch (drive starts these)

Every run is a fresh process that opens the dataset and reads one epoch with
shardpack.torch.Loader (batches of 64, uint8 images, class ids: the reading, not float
conversion, is measured), timed from open to the last batch. Methods: sequential (shuffle
off), global (shardpack's default shuffle), blocks (order="blocks", the locality-aware shuffle,
default block and window), npy (np.load of images.npy and labels.npy, then batches in the
global order).

This disk: before every run the dataset's files are evicted from the page cache
(posix_fadvise POSIX_FADV_DONTNEED on every file) and the run checks with mincore that less
than 1% stayed resident; where eviction is not possible the table says so.
Simulated disk: the files are first read into the real page cache (so that the real disk
adds nothing); the shim starts each process with an empty page cache of its own and charges
SEEK_MS per seek and the bytes at MBPS. Its floor is a sequential read through the shim with
buffered reads (O_DIRECT would add the real disk's time to the model's). The shim cannot see page faults of memory maps: runs
that map the shards are left out of the simulated table (io="pread" only), and each run
reports the mappings the shim saw.
"""
import argparse
import ctypes
import json
import mmap
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 64
SEED = 0


def data_files(work):
    """Every file of the dataset folder and the .npy copy."""
    files = []
    for folder in (pathlib.Path(work) / "data" / "ds", pathlib.Path(work) / "data" / "npy"):
        files += sorted(str(p) for p in folder.iterdir() if p.is_file())
    return files


def evict(paths):
    """Drops the files' pages from the page cache (written back first: dirty pages stay)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_fraction(paths):
    """The fraction of the files' pages in the page cache (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    resident = total = 0
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            continue
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            view = np.frombuffer(m, dtype=np.uint8)
            if libc.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            del view
            resident += int(np.frombuffer(vec, dtype=np.uint8).__and__(1).sum())
            total += pages
        finally:
            m.close()
    return resident / max(1, total)


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def direct_read(paths, direct=True):
    """Reads the files in order with O_DIRECT (or, direct=False, through the page cache) in
    8 MiB requests: (bytes, seconds)."""
    buffer = mmap.mmap(-1, 8 << 20)  # page aligned, as O_DIRECT needs
    total, start = 0, time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        try:
            while True:
                n = os.readv(fd, [buffer])
                total += n
                if n < len(buffer):
                    break
        finally:
            os.close(fd)
    return total, time.perf_counter() - start


def shim_stats():
    """The slow-disk shim's statistics in this process, or None without the shim."""
    try:
        fn = ctypes.CDLL(None).shardpack_slow_disk_stats
    except AttributeError:
        return None
    out = (ctypes.c_longlong * 6)()
    fn(out)
    return dict(zip(("reads", "seeks", "bytes", "charged_us", "mmaps", "cached_pages"), list(out)))


# ---------------------------------------------------------------- prepare
def prepare(args):
    import shardpack

    work = pathlib.Path(args.work)
    src, ds_dir, npy_dir = work / "src", work / "data" / "ds", work / "data" / "npy"
    if not (src / "list.csv").exists():
        subprocess.run([f"{args.bin}/make_sample_data", "--out", str(src), "--task", "cls", "--jpeg", "--count",
                        str(args.images), "--width", "320", "--height", "240", "--seed", "7"], check=True,
                       stdout=subprocess.DEVNULL)
    rows = (src / "list.csv").read_text().splitlines()
    with open(src / "cold.csv", "w") as f:  # the images listed again until N rows
        f.write(rows[0] + "\n")
        for i in range(args.records):
            f.write(rows[1 + i % (len(rows) - 1)] + "\n")
    subprocess.run(["rm", "-rf", str(ds_dir), str(npy_dir)], check=True)
    # Raw records (150 KB each, like an ImageNet JPEG's ~110 KB): the disk, not zstd, is measured.
    subprocess.run([f"{args.bin}/shardpack", "-q", "build", "--csv", str(src / "cold.csv"), "--out", str(ds_dir),
                    "--size", f"{args.size}x{args.size}", "--resize", "shorter", "--crop", "center", "--compression", "none",
                    "--shard-size", args.shard_size], check=True)
    ds = shardpack.open(str(ds_dir))
    npy_dir.mkdir(parents=True)
    images, labels = ds.read_batch(np.arange(len(ds)), dtype="uint8", layout="NHWC", normalize=None, label="index")
    np.save(npy_dir / "images.npy", images)
    np.save(npy_dir / "labels.npy", labels)
    print(json.dumps({"records": len(ds), "shards": len(ds.shard_starts), "data_bytes": ds.data_bytes,
                      "npy_bytes": os.path.getsize(npy_dir / "images.npy")}))


# ---------------------------------------------------------------- run
def run(args):
    work = pathlib.Path(args.work)
    sp = _sp()
    import shardpack.torch as spt  # imports (torch: seconds) are not part of the epoch

    start = time.perf_counter()
    if args.method == "npy":
        images = np.load(work / "data" / "npy" / "images.npy")
        labels = np.load(work / "data" / "npy" / "labels.npy")
        n = len(images)
        order = sp.epoch_order(n, SEED, 0)
        checksum = 0
        for b in range(0, n, BATCH):
            idx = order[b:b + BATCH]
            x, y = images[idx], labels[idx]
            checksum += int(x[:, 0, 0, 0].sum()) + int(y.sum())
        read_bytes = os.path.getsize(work / "data" / "npy" / "images.npy")
    else:
        options = {} if args.io == "default" else {"io": args.io}
        ds = sp.open(str(work / "data" / "ds"), **options)
        n = len(ds)
        shuffle = args.method != "sequential"
        order = "blocks" if args.method == "blocks" else "global"
        loader = spt.Loader(ds, batch_size=BATCH, shuffle=shuffle, seed=SEED, order=order, dtype="uint8",
                            layout="NHWC", normalize=None, label="index", threads=args.threads)
        checksum = 0
        for images, labels in loader:
            checksum += int(labels.sum())
        read_bytes = ds.data_bytes
    seconds = time.perf_counter() - start
    print(json.dumps({"method": args.method, "io": args.io, "records": n, "seconds": seconds, "bytes": read_bytes,
                      "checksum": checksum, "shim": shim_stats()}))


def _sp():
    import shardpack

    return shardpack


# ---------------------------------------------------------------- drive
def drive(args):
    work = pathlib.Path(args.work)
    files = data_files(work)
    ds_files = [f for f in files if "/data/ds/" in f]
    results = []

    def record(entry):
        results.append(entry)
        if args.results:
            with open(args.results, "a") as f:
                f.write(json.dumps({"name": "cold." + entry["disk"] + "." + entry["method"], "result": entry}) + "\n")
        print(f"cold: {entry['disk']:5} {entry['method']:10} {entry.get('io', ''):8} {entry['seconds']:7.2f} s",
              file=sys.stderr)

    sim_env = dict(os.environ, LD_PRELOAD=args.shim, SHARDPACK_SLOW_DISK_PATH=str(work / "data"),
                   SHARDPACK_SLOW_DISK_SEEK_MS=str(args.seek_ms), SHARDPACK_SLOW_DISK_MBPS=str(args.mbps))

    def one(method, io, disk):
        if disk == "local":
            evict(files)
            left = resident_fraction(files)
            env = os.environ
        else:
            warm(files)
            left = None
            env = sim_env
        cmd = [sys.executable, __file__, "run", "--work", str(work), "--method", method, "--io", io,
               "--threads", str(args.threads)]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        entry = json.loads(out.stdout.strip().splitlines()[-1])
        entry.update(disk=disk, resident_before=left)
        return entry

    def floor(disk):
        if disk == "local":
            evict(ds_files)
            nbytes, seconds = direct_read(ds_files)
            return {"disk": disk, "method": "floor", "bytes": nbytes, "seconds": seconds}
        warm(ds_files)
        code = ("import sys, json; sys.path.insert(0, %r); import cold_bench as c; "
                "b, s = c.direct_read(%r, direct=False); print(json.dumps([b, s, c.shim_stats()]))"
                % (str(pathlib.Path(__file__).parent), ds_files))
        out = subprocess.run([sys.executable, "-c", code], env=sim_env, check=True, capture_output=True, text=True)
        nbytes, seconds, stats = json.loads(out.stdout)
        return {"disk": disk, "method": "floor", "bytes": nbytes, "seconds": seconds, "shim": stats}

    # Eviction: possible here? (Some file systems keep pages; then the local table is warm.)
    evict(files)
    eviction_left = resident_fraction(files)
    methods = [("sequential", io) for io in args.io] + [("global", io) for io in args.io] + \
              [("blocks", io) for io in args.io] + [("npy", "default")]
    for disk, reps in (("local", args.reps), ("sim", args.sim_reps)):
        for r in range(reps):
            record(floor(disk))
            for method, io in methods:
                if disk == "sim" and method != "npy" and io != "pread":
                    continue  # the shim cannot see page faults of maps: simulated runs read with pread
                entry = one(method, io, disk)
                if entry["shim"] and entry["shim"]["mmaps"] and method != "npy":
                    raise SystemExit(f"cold_bench: the {method} run with io={io} mapped the shards under the "
                                     "slow-disk shim, which cannot see page faults; its time means nothing")
                record(entry)
    summary = summarize(results, eviction_left, args)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"summary": summary, "runs": results}, indent=1))
    table = markdown(summary, args)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table)
    print(table)


def summarize(results, eviction_left, args):
    rows = []
    for disk in ("local", "sim"):
        floors = [r for r in results if r["disk"] == disk and r["method"] == "floor"]
        if not floors:
            continue
        floor_rate = statistics.median(r["bytes"] / r["seconds"] for r in floors)
        keys = sorted({(r["method"], r.get("io", "")) for r in results if r["disk"] == disk and r["method"] != "floor"},
                      key=lambda k: (["sequential", "global", "blocks", "npy"].index(k[0]), k[1]))
        by = {}
        for method, io in keys:
            runs = [r for r in results if r["disk"] == disk and r["method"] == method and r.get("io", "") == io]
            seconds = statistics.median(r["seconds"] for r in runs)
            nbytes, records = runs[0]["bytes"], runs[0]["records"]
            floor_seconds = nbytes / floor_rate
            shim = runs[0].get("shim")
            by[(method, io)] = seconds
            rows.append({"disk": disk, "method": method, "io": io, "runs": len(runs), "seconds": seconds,
                         "samples_per_s": records / seconds, "mb_per_s": nbytes / seconds / 1e6,
                         "floor_seconds": floor_seconds, "vs_floor": floor_seconds / seconds,
                         "seeks": shim["seeks"] if shim else None, "mmaps": shim["mmaps"] if shim else None,
                         "resident_before": max((r["resident_before"] or 0) for r in runs)
                         if disk == "local" else None})
        for row in rows:
            if row["disk"] == disk and (("global", row["io"]) in by):
                row["vs_global"] = by[("global", row["io"])] / row["seconds"]
    return {"floor_mb_per_s": {d: statistics.median(r["bytes"] / r["seconds"] for r in results
                                                    if r["disk"] == d and r["method"] == "floor")
                               for d in ("local", "sim") if any(r["disk"] == d for r in results)},
            "eviction_left": eviction_left, "seek_ms": args.seek_ms, "mbps": args.mbps, "rows": rows}


def markdown(summary, args):
    names = {"sequential": "sequential (shuffle off)", "global": "global shuffle (default)",
             "blocks": 'blocks shuffle (order="blocks")', "npy": ".npy preload (np.load, then index)"}
    disks = {"local": "this machine's disk (cold: evicted)",
             "sim": f"simulated disk ({summary['seek_ms']:g} ms seek, {summary['mbps']:g} MB/s)"}
    out = ["| disk | order | io | first epoch s | samples/s | MB/s | vs floor | vs global | seeks |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for d, rate in summary["floor_mb_per_s"].items():
        floor = "O_DIRECT sequential read" if d == "local" else "sequential read through the shim"
        out.append(f"| {disks[d]} | floor: {floor} | | | | {rate / 1e6:.0f} | 1.00 | | |")
        for r in (r for r in summary["rows"] if r["disk"] == d):
            vs_global = f"{r['vs_global']:.2f}" if "vs_global" in r else ""
            seeks = "" if r["seeks"] is None else str(r["seeks"])
            io = "" if r["method"] == "npy" else r["io"]
            out.append(f"| {disks[d]} | {names[r['method']]} | {io} | {r['seconds']:.2f} | {r['samples_per_s']:.0f} | "
                       f"{r['mb_per_s']:.0f} | {r['vs_floor']:.2f} | {vs_global} | {seeks} |")
    left = summary["eviction_left"]
    out.append("")
    out.append(f"Eviction (posix_fadvise DONTNEED on every file): {100 * left:.1f}% of the pages stayed resident"
               + ("" if left < 0.01 else " (NOT evicted: the local rows are warm reads)") + ".")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("--bin", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--records", type=int, default=1536)
    a.add_argument("--images", type=int, default=256)
    a.add_argument("--shard-size", default="64MiB")
    a.add_argument("--size", type=int, default=224, help="records of SIZE x SIZE x 3 (224: 150 KB)")
    a = sub.add_parser("run")
    a.add_argument("--work", required=True)
    a.add_argument("--method", choices=("sequential", "global", "blocks", "npy"), required=True)
    a.add_argument("--io", default="default")
    a.add_argument("--threads", type=int, default=0)
    a = sub.add_parser("drive")
    a.add_argument("--work", required=True)
    a.add_argument("--shim", required=True)
    a.add_argument("--reps", type=int, default=3, help="rounds on this disk (medians)")
    a.add_argument("--sim-reps", type=int, default=1, help="rounds on the simulated disk (a model: one suffices)")
    a.add_argument("--seek-ms", type=float, default=8.0)
    a.add_argument("--mbps", type=float, default=150.0)
    a.add_argument("--io", nargs="+", default=["default"], help="reader io modes to run (default, mmap, pread)")
    a.add_argument("--threads", type=int, default=0)
    a.add_argument("--results")
    a.add_argument("--json")
    a.add_argument("--markdown")
    args = p.parse_args()
    {"prepare": prepare, "run": run, "drive": drive}[args.command](args)


if __name__ == "__main__":
    main()
