#!/usr/bin/env python3
"""The Python writer's benchmark (issue 32): shardpack.write from in-memory arrays against
`shardpack build` of the same pixels as PNG files minus their decode, and the writer's peak
memory over a long generator.

    writer_bench.py --bin BUILD_DIR --work DIR [--task seg|cls] [--count N] [--width W] [--height H]
                    [--threads T] [--reps R] [--memory-samples M] [--pipe]

Per repetition, in this order:
  build    shardpack build --csv (the PNGs make_sample_data wrote) --threads T: wall and CPU
  floor    bench_decode --png fast --threads T on the same list: the packer's decoders, every
           row, every image and mask: what a build from arrays does not have to do (median pass)
  writer   shardpack.write of the same samples, decoded once beforehand into NumPy arrays, the
           same options: wall, and CPU of this process and the build it runs
  pipe     (--pipe) the same write with the writer's ring off (shardpack._writer._RING_BYTES = 0):
           every pixel on the pipe, as before the ring; before the writer in odd repetitions,
           after it in even ones
The figure: (build - floor) / writer, in wall time and in CPU time, per repetition (the table
gives their median, and the same ratio from the medians of each side); >= 0.9 is the target.
Then the memory: a generator of M samples (64x64 RGB, cls) written in a fresh process, and one
of M/10; the peak RSS of the Python process and of its build process, each.
Prints a table (Markdown) and writes WORK/writer.json. Needs this package installed (the
interpreter running this script) with its CLI.
"""
import argparse
import csv
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# The peaks are VmHWM of each process (/proc/PID/status: the high-water mark of its own memory
# since exec; ru_maxrss would include what a forked child inherited): the build's sampled every
# 20 ms while it runs, this script's read at its end.
MEMORY_SCRIPT = """
import pathlib, sys, threading, time, numpy as np, shardpack
def hwm_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
peak = [0]
done = threading.Event()
def watch():
    me = pathlib.Path(f"/proc/self/task")
    while not done.is_set():
        for task in me.iterdir():
            for child in (task / "children").read_text().split():
                try:
                    peak[0] = max(peak[0], hwm_kib(child))
                except OSError:
                    pass
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
n = int(sys.argv[2])
rng = np.random.default_rng(0)
pool = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(16)]
def samples():
    for i in range(n):
        yield f"s{i:07d}", pool[i % 16], i % 10
shardpack.write(sys.argv[1], samples(), task="cls", classes=[str(c) for c in range(10)], quiet=True)
done.set()
print(hwm_kib("self"), peak[0])
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--task", choices=("seg", "cls"), default="seg")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--height", type=int, default=384)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--memory-samples", type=int, default=100000)
    p.add_argument("--pipe", action="store_true", help="also time the writer with its ring off")
    a = p.parse_args()
    import numpy as np
    import shardpack
    from shardpack import _writer
    try:  # PIL decodes in C; tests/python/pngread.py (pure Python) where it is missing
        from PIL import Image

        def read_png(path):
            with Image.open(path) as im:
                return np.asarray(im)
    except ImportError:
        from pngread import read_png

    binary = pathlib.Path(a.bin)
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"src-{a.task}-{a.count}-{a.width}x{a.height}"
    if not (src / "list.csv").exists():
        args = [binary / "make_sample_data", "--out", src, "--count", a.count, "--width", a.width, "--height", a.height]
        if a.task == "cls":
            args += ["--task", "cls"]
        subprocess.run([str(x) for x in args], check=True, stdout=subprocess.DEVNULL)
    with open(src / "list.csv", newline="") as f:
        rows = list(csv.reader(f))
    if rows and not (src / rows[0][0]).exists():
        rows = rows[1:]
    if a.task == "seg":
        classes_file = src / "class_dict.csv"
        with open(classes_file, newline="") as f:
            table = list(csv.reader(f))
        head = [h.strip().lower() for h in table[0]]
        classes = [(r[head.index("name")].strip(), tuple(int(r[head.index(c)]) for c in "rgb")) for r in table[1:]]
        samples = [(img, read_png(src / img), read_png(src / mask)) for img, mask in rows]
    else:
        names = sorted({label for _, label in rows})
        classes_file = work / "names.txt"
        classes_file.write_text("".join(n + "\n" for n in names))
        classes = names
        samples = [(img, read_png(src / img), label) for img, label in rows]
    print(f"{len(samples)} samples of {a.width}x{a.height} ({a.task}) in memory, {a.threads} threads", file=sys.stderr)

    results = []
    for rep in range(a.reps):
        out = work / "build.ds"
        c0, t0 = cpu_children(), time.perf_counter()
        subprocess.run([str(binary / "shardpack"), "-q", "build", "--csv", str(src / "list.csv"), "--classes",
                        str(classes_file), "--out", str(out), "--threads", str(a.threads), "--full"], check=True)
        build = (time.perf_counter() - t0, cpu_children() - c0)
        floor_json = json.loads(subprocess.run([str(binary / "bench_decode"), "--csv", str(src / "list.csv"), "--png", "fast",
                                                "--threads", str(a.threads), "--passes", "3"],
                                               check=True, capture_output=True, text=True).stdout)
        floor = (floor_json["seconds_median"], floor_json["cpu_seconds_median"])
        def timed_write(ring_bytes):
            kept = _writer._RING_BYTES
            _writer._RING_BYTES = ring_bytes
            try:
                c0, s0, t0 = cpu_children(), cpu_self(), time.perf_counter()
                shardpack.write(work / "writer.ds", iter(samples), task=a.task, classes=classes, threads=a.threads,
                                quiet=True)
                return time.perf_counter() - t0, cpu_children() - c0 + cpu_self() - s0
            finally:
                _writer._RING_BYTES = kept

        # The ring's write and the ring-off one alternate which goes first.
        pipe = timed_write(0) if a.pipe and rep % 2 else None
        writer = timed_write(_writer._RING_BYTES)
        r = {"build_s": build[0], "build_cpu_s": build[1], "floor_s": floor[0], "floor_cpu_s": floor[1],
             "writer_s": writer[0], "writer_cpu_s": writer[1],
             "wall_ratio": (build[0] - floor[0]) / writer[0], "cpu_ratio": (build[1] - floor[1]) / writer[1]}
        if a.pipe:
            pipe = pipe or timed_write(0)
            r.update({"pipe_s": pipe[0], "pipe_cpu_s": pipe[1], "pipe_wall_ratio": (build[0] - floor[0]) / pipe[0],
                      "pipe_cpu_ratio": (build[1] - floor[1]) / pipe[1]})
        results.append(r)
        print(json.dumps(r), file=sys.stderr)

    memory = {}
    for n in (a.memory_samples // 10, a.memory_samples):
        out = work / f"memory-{n}.ds"
        t0 = time.perf_counter()
        me, child = map(int, subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(out), str(n)], check=True,
                                            capture_output=True, text=True).stdout.split())
        memory[n] = {"python_peak_mib": me / 1024, "build_peak_mib": child / 1024, "seconds": time.perf_counter() - t0}
        print(json.dumps({n: memory[n]}), file=sys.stderr)

    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    summary = {"task": a.task, "count": len(samples), "size": f"{a.width}x{a.height}", "threads": a.threads,
               "reps": results, "median": med, "memory": memory}
    (work / "writer.json").write_text(json.dumps(summary, indent=1))
    print(f"| {a.task} {len(samples)} x {a.width}x{a.height}, {a.threads} threads (median of {a.reps}) | wall s | CPU s |")
    print("| --- | --- | --- |")
    print(f"| shardpack build from PNGs | {med['build_s']:.3f} | {med['build_cpu_s']:.3f} |")
    print(f"| their decode (bench_decode --png fast) | {med['floor_s']:.3f} | {med['floor_cpu_s']:.3f} |")
    print(f"| shardpack.write from arrays | {med['writer_s']:.3f} | {med['writer_cpu_s']:.3f} |")
    print(f"| (build - decode) / write (target >= 0.9) | {med['wall_ratio']:.3f} | {med['cpu_ratio']:.3f} |")
    of_medians = lambda w: ((med["build_s"] - med["floor_s"]) / med[w + "_s"],
                            (med["build_cpu_s"] - med["floor_cpu_s"]) / med[w + "_cpu_s"])
    print("| the same from the medians above | %.3f | %.3f |" % of_medians("writer"))
    if a.pipe:
        print(f"| shardpack.write, ring off (every pixel on the pipe) | {med['pipe_s']:.3f} | {med['pipe_cpu_s']:.3f} |")
        print(f"| (build - decode) / write, ring off | {med['pipe_wall_ratio']:.3f} | {med['pipe_cpu_ratio']:.3f} |")
        print("| the same from the medians above | %.3f | %.3f |" % of_medians("pipe"))
        print()
        print("| rep | wall ratio | CPU ratio | ring off: wall ratio | CPU ratio |")
        print("| --- | --- | --- | --- | --- |")
        for i, r in enumerate(results):
            print(f"| {i + 1} | {r['wall_ratio']:.3f} | {r['cpu_ratio']:.3f} | {r['pipe_wall_ratio']:.3f} | "
                  f"{r['pipe_cpu_ratio']:.3f} |")
    print()
    print("| generator of 64x64 cls samples | Python peak RSS MiB | build peak RSS MiB | s |")
    print("| --- | --- | --- | --- |")
    for n, m in memory.items():
        print(f"| {n} | {m['python_peak_mib']:.1f} | {m['build_peak_mib']:.1f} | {m['seconds']:.1f} |")


if __name__ == "__main__":
    main()
