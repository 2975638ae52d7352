#!/usr/bin/env bash
# Packs a dataset on a Slurm cluster: a job array builds the parts (one `shardpack build
# --partition slurm` per task), and a merge job that starts only when every task succeeded
# (afterok) makes them one dataset, equal to a one-machine build. Prints "ARRAY_JOB MERGE_JOB".
#
# Edit the options below (or set them in the environment: a set variable wins).
set -euo pipefail

# --- options ------------------------------------------------------------------------------
SHARDPACK=${SHARDPACK:-shardpack}              # the shardpack binary, on every node
CSV=${CSV:-/shared/data/list.csv}             # the input list (on a file system every node sees)
OUT=${OUT:-/shared/datasets/train}            # the merged dataset
PARTS_DIR=${PARTS_DIR:-$OUT.parts}            # one folder per part; on the same file system as OUT,
                                              # so that the merge can hard-link
PARTS=${PARTS:-16}                            # number of parts = array tasks
CPUS_PER_PART=${CPUS_PER_PART:-8}             # threads per part (--threads)
MEM_PER_PART=${MEM_PER_PART:-2G}              # a build's memory is flat: ~20 MB plus 44 bytes a row
TIME_PER_PART=${TIME_PER_PART:-04:00:00}
MERGE_TIME=${MERGE_TIME:-02:00:00}
SLURM_QUEUE=${SLURM_QUEUE:-${SLURM_PARTITION:-}}  # the cluster's queue (Slurm's --partition; SLURM_PARTITION,
                                              # the former name, is still read); empty: the default
MAX_PARALLEL=${MAX_PARALLEL:-}                # at most this many tasks at once (--array=...%N); empty: no limit
LOG_DIR=${LOG_DIR:-$PARTS_DIR/logs}
# Build options, the same for every part (word-split: no spaces inside a value).
BUILD_OPTIONS=${BUILD_OPTIONS:---size 512x512 --resize shorter --crop center}
MERGE_LINK=${MERGE_LINK:-hard}                # hard (copy across file systems) or copy
# ------------------------------------------------------------------------------------------

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$PARTS_DIR" "$LOG_DIR"
export SHARDPACK CSV OUT PARTS_DIR BUILD_OPTIONS MERGE_LINK

common=()
[[ -n "$SLURM_QUEUE" ]] && common+=(--partition="$SLURM_QUEUE")
array="0-$((PARTS - 1))"
[[ -n "$MAX_PARALLEL" ]] && array+="%$MAX_PARALLEL"

array_job=$(sbatch --parsable "${common[@]}" --job-name=shardpack-parts --array="$array" \
    --cpus-per-task="$CPUS_PER_PART" --mem="$MEM_PER_PART" --time="$TIME_PER_PART" \
    --output="$LOG_DIR/part-%A_%a.log" --export=ALL "$here/pack_part.sbatch")
array_job=${array_job%%;*}
# afterok on an array: only when every task exited 0. --kill-on-invalid-dep: a failed or
# cancelled task cancels the merge instead of leaving it pending forever.
merge_job=$(sbatch --parsable "${common[@]}" --job-name=shardpack-merge --dependency="afterok:$array_job" \
    --kill-on-invalid-dep=yes --cpus-per-task=1 --mem=1G --time="$MERGE_TIME" \
    --output="$LOG_DIR/merge-%j.log" --export=ALL "$here/merge.sbatch")
merge_job=${merge_job%%;*}
echo "$array_job $merge_job"
