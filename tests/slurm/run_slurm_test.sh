#!/usr/bin/env bash
# A real Slurm run of a partitioned build: installs Debian's slurmctld, slurmd and munge when
# missing, starts a one-node cluster on this machine (as root, no systemd: munged and the two
# daemons started directly with a minimal slurm.conf in a temporary folder), submits
# scripts/slurm/submit.sh's 4-task array and its afterok merge, and checks the merged dataset
# against a one-machine build (same content hash, manifest and record bytes). Then it holds a
# second array, cancels one task, and checks that the merge job never runs and that
# `shardpack merge` refuses, naming the missing part.
#
# Exit 0: passed; 1: failed; 77: skipped (ctest shows it as skipped), with the reason and the
# daemons' log lines. The daemons it started are always stopped.
#
# usage: run_slurm_test.sh SOURCE_DIR WORK_DIR SHARDPACK MAKE_SAMPLE_DATA
set -uo pipefail
src=$1 work=$2 shardpack=$3 make_sample=$4
deadline_s=${SHARDPACK_SLURM_TEST_WAIT:-90}

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; show_logs; exit 1; }
show_logs() {
    for f in "$tmp"/munged.log "$tmp"/slurmctld.log "$tmp"/slurmd.log; do
        [[ -s "$f" ]] && { echo "--- last lines of $f"; tail -n 15 "$f"; }
    done
}

[[ $(id -u) -eq 0 ]] || skip "needs root to start munged, slurmctld and slurmd (running as $(id -un))"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null ||
   ! command -v sbatch >/dev/null; then
    echo "installing slurmctld slurmd munge slurm-client (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurmctld slurmd munge slurm-client \
        > "$work.apt.log" 2>&1 || { tail -n 5 "$work.apt.log"; skip "apt-get could not install Slurm"; }
fi

rm -rf "$work"; mkdir -p "$work"
# Slurm and munge insist on folders that only root can write: not under the sticky /tmp.
tmp=$(mktemp -d /run/shardpack-slurm.XXXXXX) || tmp=$(mktemp -d /var/lib/shardpack-slurm.XXXXXX) || skip "no private folder"
chmod 700 "$tmp"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# --- munge --------------------------------------------------------------------------------
mkdir -p "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
munged --force --foreground --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/munged.log" \
    >>"$tmp/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S "$tmp/munge/munge.socket" ]] && break; sleep 0.1; done
[[ -S "$tmp/munge/munge.socket" ]] || { show_logs; skip "munged did not start"; }

# --- slurm --------------------------------------------------------------------------------
host=$(hostname -s)
port=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<CONF
ClusterName=shardpacktest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >>"$tmp/slurmctld.out" 2>&1 &
ctld=$!
pids+=($ctld)
slurmd -D -f "$SLURM_CONF" >>"$tmp/slurmd.out" 2>&1 &
sd=$!
pids+=($sd)
ready=0 why=""
for _ in $(seq 100); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then ready=1; break; fi
    kill -0 "$ctld" 2>/dev/null || { why="slurmctld exited; "; break; }
    kill -0 "$sd" 2>/dev/null || { why="slurmd exited; "; break; }
    sleep 0.2
done
if [[ $ready -ne 1 ]]; then
    cat "$tmp"/slurmctld.out "$tmp"/slurmd.out 2>/dev/null | tail -n 10
    show_logs
    skip "the Slurm daemons did not start (${why}node state: $(sinfo -h -o '%T' 2>&1 | head -n 1))"
fi
echo "cluster up: $(sinfo -h -o '%P %D %T %C')"

# --- data and a one-machine build -----------------------------------------------------------
"$make_sample" --out "$work/data" --count 24 --width 96 --height 64 > /dev/null || fail "make_sample_data"
options="--size 48x32 --label-layout index --shard-size 16KiB --shuffle --seed 7 --threads 1"
# shellcheck disable=SC2086
"$shardpack" -q build --csv "$work/data/list.csv" --classes "$work/data/class_dict.csv" --out "$work/single" $options ||
    fail "one-machine build"

submit() {  # PARTS_DIR OUT: prints "ARRAY MERGE"
    SHARDPACK=$shardpack CSV=$work/data/list.csv OUT=$2 PARTS_DIR=$1 PARTS=4 CPUS_PER_PART=1 MEM_PER_PART=200M \
    TIME_PER_PART=00:05:00 MERGE_TIME=00:05:00 LOG_DIR=$1/logs \
    BUILD_OPTIONS="--classes $work/data/class_dict.csv $options" "$src/scripts/slurm/submit.sh"
}
job_state() {  # "STATE" for a job; "task=STATE ..." for an array
    scontrol -o show job "$1" 2>/dev/null | awk '{
        task = ""; state = "";
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^ArrayTaskId=/) task = substr($i, 13) "=";
            if ($i ~ /^JobState=/) state = substr($i, 10);
        }
        printf "%s%s ", task, state }'
}

# --- 1: a 4-task array and its merge ----------------------------------------------------------
t0=$(date +%s)
read -r array_job merge_job < <(submit "$work/parts" "$work/merged") || fail "sbatch"
[[ -n "${merge_job:-}" ]] || fail "submit.sh printed no job ids"
echo "$(date -u +%T) submitted array job $array_job (4 tasks) and merge job $merge_job (afterok:$array_job)"
while :; do
    state=$(job_state "$merge_job")
    [[ $state == *COMPLETED* || $state == *FAILED* || $state == *CANCELLED* || $state == *TIMEOUT* ]] && break
    (( $(date +%s) - t0 > deadline_s )) && { squeue; fail "the jobs did not finish in ${deadline_s}s (merge: $state)"; }
    sleep 0.5
done
echo "$(date -u +%T) merge job $merge_job: $state after $(( $(date +%s) - t0 )) s; array tasks: $(job_state "$array_job")"
for log in "$work"/parts/logs/*.log; do echo "--- $(basename "$log")"; cat "$log"; done
[[ $state == *COMPLETED* ]] || fail "the merge job did not complete"
single_hash=$("$shardpack" inspect --json "$work/single" | grep -o '"content_hash": "[0-9a-f]*"')
merged_hash=$("$shardpack" inspect --json "$work/merged" | grep -o '"content_hash": "[0-9a-f]*"')
echo "one machine: $single_hash; merged from 4 Slurm tasks: $merged_hash"
[[ -n "$single_hash" && "$single_hash" == "$merged_hash" ]] || fail "content hashes differ"
cmp "$work/single/manifest.json" "$work/merged/manifest.json" || fail "manifests differ"
for f in "$work"/single/shard-*.spk; do
    cmp "$f" "$work/merged/$(basename "$f")" || fail "$(basename "$f") differs"
done
echo "merged dataset == one-machine build: same manifest.json and $(ls "$work"/single/shard-*.spk | wc -l) identical shards"

# --- 2: one task cancelled: the merge must not run, and must refuse when run by hand ------------
read -r array_job merge_job < <(submit "$work/parts2" "$work/merged2") || fail "sbatch (second)"
scontrol hold "$array_job" > /dev/null 2>&1 || true
scancel "${array_job}_2" || fail "scancel ${array_job}_2"
scontrol release "$array_job" > /dev/null 2>&1 || true
echo "$(date -u +%T) second array $array_job: cancelled task 2; merge job $merge_job"
t0=$(date +%s)
while :; do
    state=$(job_state "$merge_job")
    tasks=$(squeue -h -j "$array_job" 2>/dev/null | wc -l)
    [[ $tasks -eq 0 && ( -z "$state" || $state == *CANCELLED* || $state == *FAILED* || $state == *COMPLETED* ) ]] && break
    (( $(date +%s) - t0 > deadline_s )) && { squeue; fail "the second array did not finish in ${deadline_s}s"; }
    sleep 0.5
done
echo "array tasks: $(job_state "$array_job"); merge job: ${state:-gone}"
[[ $state != *COMPLETED* ]] || fail "the merge job ran although task 2 was cancelled"
[[ ! -e "$work/merged2/manifest.json" ]] || fail "a merged dataset was published without part 2"
"$shardpack" merge --out "$work/merged2" "$work/parts2" > "$work/refuse.out" 2>&1
code=$?
cat "$work/refuse.out"
[[ $code -eq 1 ]] || fail "merge without part 2 exited $code, expected 1"
grep -q "missing part 2 of 4" "$work/refuse.out" || fail "the refusal does not name part 2"
[[ ! -e "$work/merged2/manifest.json" ]] || fail "the refused merge published a dataset"
echo "PASSED"
