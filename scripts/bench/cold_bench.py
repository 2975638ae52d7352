#!/usr/bin/env python3
"""The cold-storage benchmark (scripts/bench.sh --cold, issue 29): cold epochs, measured through the
kernel, of the user's ways and the reader's, side by side in one run.

  cold_bench.py prepare --bin BIN --work W [--quick]
  cold_bench.py drive --bin BIN --work W [--quick] [--reps R] [--max-seconds S] [--storage local,hdd,nfs]
                [--ways floor,npy,...] [--json OUT] [--markdown OUT]

Storage:
- hdd: slowfs (../shared/tools/slowfs, built as BIN/slowfs), a FUSE mount that models one hard disk
  below the page cache (SLOWFS_SEEK_MS=8 SLOWFS_MBPS=150), so that read-ahead, fadvise/madvise
  hints and page faults of memory maps reach the model as they reach a disk;
- nfs: the same mount modelling NFS over a LAN (SLOWFS_SEEK_MS=0 SLOWFS_REQ_MS=1 SLOWFS_MBPS=1000);
- local: this machine's own disk.
Both mounts get 128 KiB of read-ahead (/sys/class/bdi/MAJ:MIN/read_ahead_kb: the kernel's
default, what most disks and NFS mounts have). Before every run the dataset's files (and the .npy
copy) are evicted from the page cache (posix_fadvise DONTNEED; on the local disk mincore then
checks that under 1% stayed). The mounts' source files stay in the real page cache, so the model
is the whole cost there. Without /dev/fuse, root or BIN/slowfs the two models are reported as not
measured, with the reason.

Datasets (`prepare`): cls, 7,000 grey 112x112 records (the user the project started from);
seg, 200 512x512 segmentation records (RGB image and one-hot label, ~1.8 MB each, far larger than
the read-ahead); cls-half, the cls dataset read for 3 epochs with the reader's cache budget
(cache_bytes) set to half its size, every epoch evicted first (a dataset twice the budget that
does not stay in memory). --quick: 1,000 cls records, 24 seg records, 2 epochs, 1 rep, a 6 s cut.

Ways (rows), each in a fresh process (a fork of the driver, which has imported torch already;
peak RSS and CPU seconds are the child's, from wait4):
- floor: the dataset's files read in order (local: O_DIRECT, 8 MiB requests; mounts: 1 MiB reads);
- npy: the user's preload: np.load of one .npy of all images and one of the labels, then shuffled
  batches indexed in RAM (the global order);
- mmap-global: today's default: Loader(shardpack.open(p, io="mmap"), order="global");
- pread-blocks: today's documented slow-disk recipe: Loader(shardpack.open(p, io="pread"), order="blocks");
- loader: shardpack.torch.Loader(p) with no options but the batch size (cls-half: cache_bytes);
- cxx-auto: the C++ reader (BIN/bench_cold_io): open_options{} (io automatic; cls-half:
  cache_bytes), the dataset's preferred order, uint8 as stored, one thread.
Batches: 512 (cls), 16 (seg). Every Loader row uses the Loader's defaults otherwise (float32 NCHW
images, one-hot labels), so its CPU seconds include that conversion; npy and the C++ reader hand
out uint8 as stored. A way this reader lacks (cache_bytes, io="stream"/"blocks" before the I/O
engine) is reported "not available". A run still going after --max-seconds (default 20) stops
at the next batch: its row is the epoch's time at the rate reached, marked, and it is not
repeated in later reps. Figures: medians over the interleaved reps (floor and fast rows).
"""
import argparse
import ctypes
import inspect
import json
import mmap
import select
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

SEED = 0
PROFILES = {
    "hdd": {"SLOWFS_SEEK_MS": "8", "SLOWFS_MBPS": "150", "SLOWFS_REQ_MS": "0"},
    "nfs": {"SLOWFS_SEEK_MS": "0", "SLOWFS_MBPS": "1000", "SLOWFS_REQ_MS": "1"},
}
STORAGE_NAMES = {"local": "this machine's disk (evicted)", "hdd": "hard-disk model (8 ms, 150 MB/s)",
                 "nfs": "NFS model (1 ms a request, 1 GB/s)"}
ROWS = ["floor", "npy", "mmap-global", "pread-blocks", "loader", "cxx-auto"]
ROW_NAMES = {
    "floor": "floor: the files read in order",
    "npy": "np.load preload, then shuffled batches in RAM",
    "mmap-global": 'today\'s default: Loader(open(p, io="mmap")), global order',
    "pread-blocks": 'today\'s recipe: Loader(open(p, io="pread"), order="blocks")',
    "loader": "Loader(p), no options",
    "cxx-auto": "C++ reader: open_options{} (io auto), preferred order",
}
READ_AHEAD_KB = 128


# ---------------------------------------------------------------- files and the page cache
def files_of(folder):
    return sorted(str(p) for p in pathlib.Path(folder).iterdir() if p.is_file())


def evict(paths):
    """Drops the files' pages from the page cache (written back first: dirty pages stay)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            try:
                os.fdatasync(fd)  # dirty pages (a file just written) would stay
            except OSError:
                pass  # a read-only FUSE mount may not implement it: nothing is dirty there
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
            resident += int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())
            total += pages
        finally:
            m.close()
    return resident / max(1, total)


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(8 << 20):
                pass


def read_in_order(paths, direct):
    """Reads the files in order: O_DIRECT in 8 MiB requests, or buffered in 1 MiB reads. Bytes."""
    size = (8 << 20) if direct else (1 << 20)
    buffer = mmap.mmap(-1, size)  # page aligned, as O_DIRECT needs
    total = 0
    for p in paths:
        fd = os.open(p, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        try:
            while True:
                n = os.readv(fd, [buffer])
                total += n
                if n == 0 or (direct and n < size):
                    break
        finally:
            os.close(fd)
    return total


# ---------------------------------------------------------------- slowfs
class Slowfs:
    """slowfs serving `source` at `mountpoint` with a profile of PROFILES, at 128 KiB of read-ahead."""

    def __init__(self, binary, source, mountpoint, profile, log):
        self.mountpoint, self.log = str(mountpoint), str(log)
        os.makedirs(self.mountpoint, exist_ok=True)
        subprocess.run(["fusermount3", "-u", "-q", self.mountpoint], stderr=subprocess.DEVNULL)
        parent = os.stat(os.path.dirname(os.path.abspath(self.mountpoint))).st_dev
        env = dict(os.environ, SLOWFS_SRC=str(source), **PROFILES[profile])
        with open(self.log, "w") as f:
            self.process = subprocess.Popen([binary, self.mountpoint, "-f", "-o", "ro"], env=env, stderr=f,
                                            stdout=subprocess.DEVNULL)
        start = time.monotonic()
        while os.stat(self.mountpoint).st_dev == parent:
            if self.process.poll() is not None:
                raise RuntimeError(f"slowfs exited before mounting: {pathlib.Path(self.log).read_text()}")
            if time.monotonic() - start > 20:
                self.close()
                raise RuntimeError("slowfs did not mount within 20 s")
            time.sleep(0.02)
        dev = os.stat(self.mountpoint).st_dev
        self.read_ahead_file = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
        with open(self.read_ahead_file, "w") as f:
            f.write(f"{READ_AHEAD_KB}\n")
        self.read_ahead_kb = int(pathlib.Path(self.read_ahead_file).read_text())
        if self.read_ahead_kb != READ_AHEAD_KB:
            self.close()
            raise RuntimeError(f"{self.read_ahead_file} reads {self.read_ahead_kb}, not {READ_AHEAD_KB}")

    def counts(self):
        """(reads, seeks, bytes) so far: SIGUSR1 makes slowfs print them to its log."""
        def lines():
            return [ln for ln in pathlib.Path(self.log).read_text().splitlines() if ln.startswith("slowfs: ")]
        before = len(lines())
        self.process.send_signal(signal.SIGUSR1)
        for _ in range(400):
            now = lines()
            if len(now) > before:
                w = now[-1].split()
                return int(w[1]), int(w[3]), int(w[5])
            time.sleep(0.005)
        raise RuntimeError("slowfs printed no counters after SIGUSR1")

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mountpoint], stderr=subprocess.DEVNULL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def slowfs_unusable(binary):
    if not os.path.exists(binary):
        return f"{binary} was not built (fuse3 or ../shared/tools/slowfs/slowfs.c missing)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "no usable /dev/fuse"
    if os.geteuid() != 0:
        return "not root (setting the mount's read_ahead_kb needs root)"
    return ""


# ---------------------------------------------------------------- prepare
def sizes(args):
    seg = args.seg_records or (24 if args.quick else 200)
    return {"cls": 1000 if args.quick else 7000, "seg": seg, "epochs": 2 if args.quick else 3}


def chosen(args):
    """The datasets asked for (--datasets), and the built ones they read (cls-half reads cls)."""
    wanted = [d for d in args.datasets.split(",") if d]
    bad = [d for d in wanted if d not in ("cls", "seg", "cls-half")]
    if bad:
        sys.exit(f"cold_bench.py: unknown dataset(s) {', '.join(bad)} (cls, seg, cls-half)")
    return wanted, sorted({"cls" if d == "cls-half" else d for d in wanted})


def prepare(args):
    import shardpack

    work = pathlib.Path(args.work)
    n = sizes(args)
    built = chosen(args)[1]
    out = {}
    for name, task, count, width, extra, records in (
            ("cls", "cls", 64, 112, ["--color", "gray", "--size", "112x112"], n["cls"]),
            ("seg", "seg", 16, 512, ["--size", "512x512", "--compression", "none"], n["seg"])):
        if name not in built:
            continue
        src, data = work / "src" / name, work / "data" / name
        if not (src / "list.csv").exists():
            subprocess.run([f"{args.bin}/make_sample_data", "--out", str(src), "--task", task, "--count", str(count),
                            "--width", str(width), "--height", str(width), "--seed", "7"], check=True,
                           stdout=subprocess.DEVNULL)
        stamp = data / "records.txt"
        if stamp.exists() and stamp.read_text() == str(records):
            ds = shardpack.open(str(data / "ds"))
        else:
            rows = (src / "list.csv").read_text().splitlines()
            with open(src / "cold.csv", "w") as f:  # the images listed again until N rows
                f.write(rows[0] + "\n")
                for i in range(records):
                    f.write(rows[1 + i % (len(rows) - 1)] + "\n")
            subprocess.run(["rm", "-rf", str(data)], check=True)
            data.mkdir(parents=True)
            build = [f"{args.bin}/shardpack", "-q", "build", "--csv", str(src / "cold.csv"), "--out", str(data / "ds"),
                     "--shard-size", "64MiB"] + extra
            if task == "seg":
                build += ["--classes", str(src / "class_dict.csv")]
            subprocess.run(build, check=True)
            ds = shardpack.open(str(data / "ds"))
            (data / "npy").mkdir()
            images, labels = ds.read_batch(np.arange(len(ds)), dtype="uint8", layout="NHWC", normalize=None,
                                           label="index", label_dtype="uint8" if task == "seg" else None)
            np.save(data / "npy" / "images.npy", images)
            np.save(data / "npy" / "labels.npy", labels)
            del images, labels
            stamp.write_text(str(records))
        out[name] = {"records": len(ds), "shards": len(ds.shard_starts), "data_bytes": ds.data_bytes,
                     "npy_bytes": sum(os.path.getsize(p) for p in files_of(data / "npy"))}
    print(json.dumps(out))


# ---------------------------------------------------------------- one run (in a forked child)
def loader_options():
    """What this package's Loader and open() take: {'cache_bytes': bool, 'io': [...]}."""
    import shardpack
    import shardpack.torch as spt

    loader = inspect.signature(spt.Loader.__init__).parameters
    ios = ["auto", "mmap", "pread"]
    try:
        import typing
        ios = list(typing.get_args(shardpack.IO)) or ios
    except AttributeError:
        pass
    return {"cache_bytes": "cache_bytes" in loader, "io": ios}


def run_row(row, ds_dir, npy_dir, batch, epochs, cache_bytes, cap, direct, evict_paths, send):
    """Reads `epochs` epochs the way `row` says; the files are evicted before each epoch (the
    first: by the driver). send("P", [epoch, records, seconds]) after every batch, send("E", {seconds,
    records, bytes, cut, io}) after every epoch."""
    import shardpack
    import shardpack.torch as spt

    state = {}
    for e in range(epochs):
        if e > 0:
            evict(evict_paths)
        start = time.perf_counter()
        cut = False
        io = ""
        if row == "floor":
            nbytes = read_in_order(files_of(ds_dir), direct)
            records = None
        elif row == "npy":
            images = np.load(os.path.join(npy_dir, "images.npy"))
            labels = np.load(os.path.join(npy_dir, "labels.npy"))
            n = len(images)
            order = shardpack.epoch_order(n, SEED, e)
            records = 0
            for b in range(0, n, batch):
                idx = order[b:b + batch]
                x, y = images[idx], labels[idx]
                records += len(idx)
                send("P", [e, records, time.perf_counter() - start])
                if cap and time.perf_counter() - start > cap and records < n:
                    cut = True
                    break
            del images, labels, x, y
            nbytes = sum(os.path.getsize(p) for p in files_of(npy_dir))
        else:
            if "loader" not in state:
                if row == "mmap-global":
                    state["loader"] = spt.Loader(shardpack.open(ds_dir, io="mmap"), batch_size=batch, order="global")
                elif row == "pread-blocks":
                    state["loader"] = spt.Loader(shardpack.open(ds_dir, io="pread"), batch_size=batch, order="blocks")
                elif cache_bytes:
                    state["loader"] = spt.Loader(ds_dir, batch_size=batch, cache_bytes=cache_bytes)
                else:
                    state["loader"] = spt.Loader(ds_dir, batch_size=batch)
            loader = state["loader"]
            loader.set_epoch(e)
            n = len(loader.dataset)
            records = 0
            for images, labels in loader:
                records += len(labels)
                send("P", [e, records, time.perf_counter() - start])
                if cap and time.perf_counter() - start > cap and records < n:
                    cut = True
                    break
            nbytes = loader.dataset.data_bytes
            io = str(getattr(loader.dataset, "io", ""))
        send("E", {"seconds": time.perf_counter() - start, "records": records, "bytes": nbytes, "cut": cut, "io": io})
        if cut:
            break  # later epochs are not read


def cut_epoch(progress, records_total, seconds):
    """The epoch a run was stopped in, from its last progress report (epoch, records, seconds)."""
    if progress and progress[1] > 0:
        return {"seconds": progress[2], "records": progress[1], "bytes": None, "cut": True, "io": "",
                "killed": True}
    # Not one batch in `seconds`: only a lower bound on the epoch's time.
    return {"seconds": seconds, "records": 0, "bytes": None, "cut": True, "io": "", "killed": True,
            "lower_bound": True}


def in_child(fn, records_total, hard):
    """Runs fn(send) in a forked child, killed when an epoch takes longer than `hard` seconds:
    (its epochs, peak RSS in bytes, CPU seconds)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        os.close(r)
        out = os.fdopen(w, "w", buffering=1)

        def send(kind, value):
            out.write(kind + " " + json.dumps(value) + "\n")
        try:
            fn(send)
        except BaseException as e:  # reported to the driver
            send("X", f"{type(e).__name__}: {e}")
            code = 1
        out.flush()
        os._exit(code)  # no cleanup: a Loader cut mid-epoch would wait for its batch
    os.close(w)
    epochs, progress, error, buffer = [], None, None, b""
    deadline = time.monotonic() + hard
    killed = False
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([r], [], [], max(0.0, left))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            kind, value = line.decode().split(" ", 1)
            value = json.loads(value)
            if kind == "P":
                progress = value
            elif kind == "E":
                epochs.append(value)
                progress = None
                deadline = time.monotonic() + hard
            elif kind == "X":
                error = value
    os.close(r)
    _, _, usage = os.wait4(pid, 0)
    if error:
        raise RuntimeError(error)
    if killed:
        epochs.append(cut_epoch(progress, records_total, hard))
    return epochs, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def run_cxx(binary, ds_dir, batch, epochs, cache_bytes, cap, hard):
    """bench_cold_io on ds_dir, cold only, killed as in_child: its epochs, peak RSS bytes, CPU seconds."""
    import resource
    import threading

    cmd = [binary, ds_dir, "--reps", "1", "--io", "auto", "--order", "preferred", "--batch", str(batch),
           "--epochs", str(epochs), "--no-warm", "--progress"]
    if cache_bytes:
        cmd += ["--cache-bytes", str(cache_bytes)]
    if cap:
        cmd += ["--max-seconds", str(cap)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = {"progress": None, "epoch_ends": [], "err": []}

    def read_stderr():
        for line in p.stderr:
            state["err"].append(line)
            w = line.split()
            if len(w) == 5 and w[1] == "progress":
                e, records, seconds = int(w[2]) - 1, int(w[3]), float(w[4])
                if state["progress"] and state["progress"][0] < e:
                    state["epoch_ends"].append(state["progress"])
                state["progress"] = [e, records, seconds]
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    killed = False
    out = ""
    while True:
        done_epochs = len(state["epoch_ends"])
        try:
            out, _ = p.communicate(timeout=hard)
            break
        except subprocess.TimeoutExpired:
            if len(state["epoch_ends"]) > done_epochs:
                continue  # an epoch ended meanwhile: the next gets its own time
            p.kill()
            p.communicate()
            killed = True
            break
    reader.join(timeout=5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if killed:
        results = [{"seconds": x[2], "records": x[1], "bytes": None, "cut": False, "io": ""}
                   for x in state["epoch_ends"]]
        return results + [cut_epoch(state["progress"], None, hard)], None, cpu
    if p.returncode != 0:
        raise RuntimeError(f"bench_cold_io failed ({p.returncode}): {''.join(state['err'])[-500:]}")
    j = json.loads(out.strip().splitlines()[-1])
    n = j["records"]
    results = []
    for e in range(epochs):
        key = "preferred.auto.cold" + ("" if e == 0 else f"-epoch{e + 1}")
        if key not in j["runs"]:
            break
        run = j["runs"][key]
        records = run.get("records_read", n)
        results.append({"seconds": run["seconds"], "records": records, "bytes": None, "cut": records < n,
                        "io": j.get("io_chosen", "")})
    return results, j["peak_rss_kib"] * 1024, cpu


def cxx_features(binary):
    out = subprocess.run([binary, "--features"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


# ---------------------------------------------------------------- drive
def drive(args):
    import shardpack
    import shardpack.torch  # noqa: F401  (imported once here: every row's fork has it)

    work = pathlib.Path(args.work).resolve()
    n = sizes(args)
    wanted, built = chosen(args)
    reps = args.reps or (1 if args.quick else 3)
    cap = args.max_seconds or (6.0 if args.quick else 15.0)
    hard = cap * 1.5 + 2  # a run still in its first batches by then is stopped (a lower bound)
    py = loader_options()
    cxx_bin = os.path.join(args.bin, "bench_cold_io")
    cxx = cxx_features(cxx_bin)
    info = {}
    for name in built:
        ds = shardpack.open(str(work / "data" / name / "ds"))
        info[name] = {"records": len(ds), "shards": len(ds.shard_starts), "data_bytes": ds.data_bytes,
                      "file_bytes": sum(os.path.getsize(p) for p in files_of(work / "data" / name / "ds")),
                      "npy_bytes": sum(os.path.getsize(p) for p in files_of(work / "data" / name / "npy"))}
        del ds
    half = info["cls"]["data_bytes"] // 2 if "cls" in info else 0
    datasets = [d for d in [("cls", "cls", 512, 1, 0), ("seg", "seg", 16, 1, 0),
                            ("cls-half", "cls", 512, n["epochs"], half)] if d[0] in wanted]
    storages = [s for s in args.storage.split(",") if s]
    notes, runs = [], []
    slowfs_bin = os.path.join(args.bin, "slowfs")
    why_not = slowfs_unusable(slowfs_bin)
    all_local = [p for name in built for p in files_of(work / "data" / name / "ds") + files_of(work / "data" / name / "npy")]
    eviction_left = None
    done_cut = set()  # (storage, dataset, row) cut in an earlier rep: not repeated

    def unavailable(dataset, row):
        if dataset == "cls-half":
            if row == "npy":
                return "a .npy preload needs the whole dataset in memory, which this dataset models as too large"
            if row == "mmap-global":
                return "mapped pages cannot be evicted between epochs from outside the process"
            if row == "loader" and not py["cache_bytes"]:
                return "Loader(cache_bytes=) is not available in this package (no I/O engine)"
            if row == "cxx-auto" and not cxx["cache_bytes"]:
                return "open_options::cache_bytes is not available in this reader (no I/O engine)"
        return ""

    for storage in storages:
        mount = None
        if storage != "local":
            if why_not:
                notes.append(f"{STORAGE_NAMES[storage]}: not measured: {why_not}")
                continue
            warm(all_local)
            mount = Slowfs(slowfs_bin, work / "data", work / f"mnt-{storage}", storage, work / f"slowfs-{storage}.log")
        try:
            root = work / "data" if mount is None else pathlib.Path(mount.mountpoint)
            for rep in range(reps):
                for dataset, base, batch, epochs, cache_bytes in datasets:
                    ds_dir, npy_dir = str(root / base / "ds"), str(root / base / "npy")
                    paths = files_of(ds_dir) + files_of(npy_dir)
                    ways = [w for w in ROWS if w in args.ways.split(",")]
                    rows = ways[rep % len(ways):] + ways[:rep % len(ways)]  # interleaved, rotated each rep
                    for row in rows:
                        why = unavailable(dataset, row)
                        if why:
                            if rep == 0:
                                runs.append({"storage": storage, "dataset": dataset, "row": row, "unavailable": why})
                            continue
                        if (storage, dataset, row) in done_cut:
                            continue
                        evict(paths)
                        left = resident_fraction(paths) if mount is None else None
                        if left is not None:
                            eviction_left = max(eviction_left or 0, left)
                        before = mount.counts() if mount else None
                        records_total = info[base]["records"]
                        if row == "cxx-auto":
                            epochs_out, rss, cpu = run_cxx(cxx_bin, ds_dir, batch, epochs, cache_bytes, cap, hard)
                        else:
                            epochs_out, rss, cpu = in_child(lambda send: run_row(
                                row, ds_dir, npy_dir, batch, epochs, cache_bytes if row == "loader" else 0, cap,
                                direct=mount is None, evict_paths=paths, send=send), records_total, hard)
                        after = mount.counts() if mount else None
                        entry = {"storage": storage, "dataset": dataset, "row": row, "rep": rep, "epochs": epochs_out,
                                 "peak_rss": rss, "cpu_s": cpu, "resident_before": left,
                                 "seeks": after[1] - before[1] if mount else None,
                                 "disk_reads": after[0] - before[0] if mount else None,
                                 "disk_bytes": after[2] - before[2] if mount else None}
                        runs.append(entry)
                        if any(x["cut"] for x in epochs_out):
                            done_cut.add((storage, dataset, row))
                        print(f"cold: {storage:5} {dataset:8} {row:12} rep {rep + 1}: " +
                              ", ".join(f"{x['seconds']:.2f} s" + (" (cut)" if x["cut"] else "") for x in epochs_out) +
                              (f", {entry['seeks']} seeks" if mount else ""), file=sys.stderr, flush=True)
        finally:
            if mount:
                mount.close()
    summary = summarize(runs, info, datasets)
    report = {"summary": summary, "runs": runs, "datasets": info, "notes": notes, "reps": reps, "cut_seconds": cap,
              "eviction_left": eviction_left, "read_ahead_kb": READ_AHEAD_KB, "python": py, "cxx": cxx,
              "half_cache_bytes": half}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1))
    table = markdown(report)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table)
    print(table)


def summarize(runs, info, datasets):
    """Per (storage, dataset, row, epoch): medians over reps, and the ratios to the floor and np.load."""
    rows = []
    records_of = {d: info[base]["records"] for d, base, *_ in datasets}
    bytes_of = {d: info[base]["data_bytes"] for d, base, *_ in datasets}
    keys = []
    for r in runs:
        k = (r["storage"], r["dataset"], r["row"])
        if k not in keys:
            keys.append(k)
    for storage, dataset, row in keys:
        mine = [r for r in runs if (r["storage"], r["dataset"], r["row"]) == (storage, dataset, row)]
        if "unavailable" in mine[0]:
            rows.append({"storage": storage, "dataset": dataset, "row": row, "unavailable": mine[0]["unavailable"]})
            continue
        for e in range(max(len(r["epochs"]) for r in mine)):
            eps = [(r, r["epochs"][e]) for r in mine if len(r["epochs"]) > e]
            n = records_of[dataset]
            # The epoch's time: measured, or at the rate reached when cut.
            secs = [x["seconds"] * (n / x["records"] if x["cut"] and x["records"] else 1) for _, x in eps]
            nbytes = eps[0][1]["bytes"] or bytes_of[dataset]
            rows.append({"storage": storage, "dataset": dataset, "row": row, "epoch": e + 1, "runs": len(eps),
                         "seconds": statistics.median(secs), "cut": any(x["cut"] for _, x in eps),
                         "records_read": min((n if x["records"] is None else x["records"]) for _, x in eps),
                         "records": n, "lower_bound": any(x.get("lower_bound") for _, x in eps),
                         "samples_per_s": n / statistics.median(secs), "mb_per_s": nbytes / statistics.median(secs) / 1e6,
                         "seeks": _median([r["seeks"] for r, _ in eps if len(r["epochs"]) == 1]),
                         "peak_rss_mb": _median([r["peak_rss"] / 1e6 for r, _ in eps if r["peak_rss"]]),
                         "cpu_s": _median([r["cpu_s"] for r, _ in eps if r["cpu_s"] is not None and len(r["epochs"]) == 1]),
                         "io": eps[0][1].get("io", "")})
    for r in rows:
        if "unavailable" in r:
            continue
        for ref, name in (("floor", "vs_floor"), ("npy", "vs_npy")):
            match = [x for x in rows if (x["storage"], x["dataset"], x["row"], x.get("epoch")) ==
                     (r["storage"], r["dataset"], ref, r["epoch"]) and "seconds" in x]
            if match:
                r[name] = match[0]["seconds"] / r["seconds"]
    return rows


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def markdown(report):
    info = report["datasets"]
    described = {}
    if "cls" in info:
        described["cls"] = f"cls: {info['cls']['records']:,} grey 112x112, {info['cls']['data_bytes'] / 1e6:.0f} MB, batches of 512"
    if "seg" in info:
        described["seg"] = (f"seg: {info['seg']['records']:,} 512x512 RGB + one-hot label, "
                            f"{info['seg']['data_bytes'] / 1e6:.0f} MB, batches of 16")
    if any(r["dataset"] == "cls-half" for r in report["summary"]):
        described["cls-half"] = (f"cls-half: the cls dataset, cache_bytes = {report['half_cache_bytes'] / 1e6:.0f} MB "
                                 "(half), every epoch evicted first")
    out = ["| storage | dataset | way | epoch | s | samples/s | MB/s | vs floor | vs np.load | seeks | peak RSS MB | CPU s | io |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["summary"]:
        name = ROW_NAMES[r["row"]]
        if "unavailable" in r:
            out.append(f"| {STORAGE_NAMES[r['storage']]} | {r['dataset']} | {name} | | not available: "
                       f"{r['unavailable']} | | | | | | | | |")
            continue
        secs = ("> " if r["lower_bound"] else "") + f"{r['seconds']:.2f}" + ("*" if r["cut"] else "")
        less = "< " if r["lower_bound"] else ""
        f = lambda v, fmt: "" if v is None else format(v, fmt)  # noqa: E731
        out.append(f"| {STORAGE_NAMES[r['storage']]} | {r['dataset']} | {name} | {r['epoch']} | {secs} | "
                   f"{less}{r['samples_per_s']:.0f} | {less}{r['mb_per_s']:.0f} | {less}{f(r.get('vs_floor'), '.2f')} | "
                   f"{less}{f(r.get('vs_npy'), '.2f')} | {f(r['seeks'], '.0f')} | {f(r['peak_rss_mb'], '.0f')} | "
                   f"{f(r['cpu_s'], '.1f')} | {r['io']} |")
    out.append("")
    for d in described.values():
        out.append(f"- {d}")
    cut = [r for r in report["summary"] if r.get("cut")]
    if cut:
        out.append(f"- \\* cut after {report['cut_seconds']:g} s (at the next batch, or stopped at "
                   f"{report['cut_seconds'] * 1.5 + 2:g} s): the epoch's time at the rate reached, from the fewest "
                   "records any rep read; \"> s\": not one batch by then, a lower bound (" +
                   "; ".join(f"{r['storage']} {r['dataset']} {r['row']}: {r['records_read']:,} of {r['records']:,}"
                             for r in cut) + "); measured once, not repeated.")
    out.append(f"- {report['reps']} interleaved rep(s), medians; read-ahead of the mounts: {report['read_ahead_kb']} KiB; "
               "seeks: slowfs's count over the whole run (opening included); peak RSS and CPU: the run's process "
               "(CPU: not for multi-epoch rows).")
    left = report["eviction_left"]
    if left is not None:
        out.append(f"- Eviction on this machine's disk: at most {100 * left:.1f}% of the pages stayed resident"
                   + ("" if left < 0.01 else " (NOT evicted: those rows are partly warm)") + ".")
    for note in report["notes"]:
        out.append(f"- {note}")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for command in ("prepare", "drive"):
        a = sub.add_parser(command)
        a.add_argument("--bin", required=True)
        a.add_argument("--work", required=True)
        a.add_argument("--quick", action="store_true")
        a.add_argument("--datasets", default="cls,seg,cls-half", help="which of cls, seg, cls-half (default: all)")
        a.add_argument("--seg-records", type=int, default=0,
                       help="records of the seg dataset (default 200, --quick 24; 1,150 make ~2 GB)")
    a.add_argument("--reps", type=int, default=0, help="interleaved reps (default 3; --quick 1)")
    a.add_argument("--max-seconds", type=float, default=0, help="cut a run after this long (default 20; --quick 6)")
    a.add_argument("--storage", default="local,hdd,nfs")
    a.add_argument("--ways", default=",".join(ROWS), help="the rows to run (default: all)")
    a.add_argument("--json")
    a.add_argument("--markdown")
    args = p.parse_args()
    {"prepare": prepare, "drive": drive}[args.command](args)


if __name__ == "__main__":
    main()
