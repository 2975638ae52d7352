#!/usr/bin/env python3
"""A partitioned build with Ray: one ray.remote task per part (`shardpack build --partition K/N`),
then `shardpack merge` of the parts into one dataset, equal byte for byte to a one-machine build.

    python build_parts.py --csv /shared/list.csv --parts-dir /shared/train.parts --out /shared/train \\
        --parts 16 --cpus-per-part 8 -- --classes /shared/class_dict.csv --size 512x512

Every node must see the input list, the images and the parts folder at the same paths (a shared
file system), and have the shardpack CLI (--shardpack, default: `shardpack` on PATH). Connects
to a running cluster (ray.init(address="auto")) or, with --local, starts Ray in this process.
A part whose task fails is retried by Ray (max_retries) and resumes incrementally; if one still
fails, nothing is merged and the exit status is 1. The merge refuses a missing or foreign part.

tests/ray/run_ray_test.sh runs it with a local Ray (num_cpus=2) where Ray is installed.
"""
import argparse
import subprocess
import sys

import ray


@ray.remote(max_retries=2)
def pack_part(shardpack, csv, parts_dir, k, n, threads, options):
    out = f"{parts_dir}/part-{k:05d}"
    r = subprocess.run([shardpack, "build", "--csv", csv, "--out", out, "--partition", f"{k}/{n}",
                        "--threads", str(threads), *options], capture_output=True, text=True)
    return k, r.returncode, r.stderr[-4000:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--csv", required=True)
    p.add_argument("--parts-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--parts", type=int, required=True)
    p.add_argument("--cpus-per-part", type=int, default=1)
    p.add_argument("--shardpack", default="shardpack")
    p.add_argument("--local", action="store_true", help="start Ray here instead of joining a cluster")
    p.add_argument("--local-cpus", type=int, default=None)
    p.add_argument("build_options", nargs="*", help="after --: options of every part's build")
    a = p.parse_args()
    if a.parts < 1:
        p.error("--parts must be at least 1")
    if a.local:
        ray.init(num_cpus=a.local_cpus, include_dashboard=False)
    else:
        ray.init(address="auto")
    tasks = [pack_part.options(num_cpus=a.cpus_per_part).remote(a.shardpack, a.csv, a.parts_dir, k, a.parts,
                                                                 a.cpus_per_part, a.build_options)
             for k in range(a.parts)]
    failed = []
    for k, code, err in ray.get(tasks):
        print(f"part {k} of {a.parts}: exit {code}", file=sys.stderr)
        if code != 0:
            failed.append(k)
            sys.stderr.write(err)
    if failed:
        print(f"parts {failed} failed: not merged", file=sys.stderr)
        return 1
    return subprocess.run([a.shardpack, "merge", "--out", a.out, a.parts_dir]).returncode


if __name__ == "__main__":
    sys.exit(main())
