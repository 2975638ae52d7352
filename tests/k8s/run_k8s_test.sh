#!/usr/bin/env bash
# A partitioned build as a Kubernetes Indexed Job would run it, without a cluster: 4 processes of
# scripts/k8s/pack_part.sh (the pods' command in scripts/k8s/build-job.yaml), each with its
# JOB_COMPLETION_INDEX, run at once; then scripts/k8s/merge.sh. The merged dataset must equal a
# one-machine build byte for byte (content hash, manifest.json, every shard). A merge without
# part 2, or with a part of another build in its place, must be refused (exit 1, naming it), as
# in the Slurm case (tests/slurm/run_slurm_test.sh). Also checks that build-job.yaml's
# completions and PARTS agree.
#
# usage: run_k8s_test.sh SOURCE_DIR WORK_DIR SHARDPACK MAKE_SAMPLE_DATA
set -uo pipefail
src=$1 work=$2 shardpack=$3 make_sample=$4
fail() { echo "FAILED: $*"; exit 1; }

yaml=$src/scripts/k8s/build-job.yaml
completions=$(sed -n 's/^ *completions: *\([0-9]*\).*/\1/p' "$yaml")
parts_env=$(grep -A1 'name: PARTS$' "$yaml" | sed -n 's/^ *value: *"\([0-9]*\)".*/\1/p')
[[ -n "$completions" && "$completions" == "$parts_env" ]] ||
    fail "build-job.yaml: completions ($completions) and PARTS ($parts_env) differ"
grep -q 'pack_part.sh' "$yaml" || fail "build-job.yaml does not run pack_part.sh"

rm -rf "$work"; mkdir -p "$work"
"$make_sample" --out "$work/data" --count 24 --width 96 --height 64 > /dev/null || fail "make_sample_data"
options="--size 48x32 --label-layout index --shard-size 16KiB --shuffle --seed 7 --threads 1"
"$shardpack" -q build --csv "$work/data/list.csv" --classes "$work/data/class_dict.csv" --out "$work/single" $options ||
    fail "one-machine build"

pods() {  # PARTS_DIR PARTS BUILD_OPTIONS: the Indexed Job's pods, all at once
    local pids=() k
    for ((k = 0; k < $2; k++)); do
        SHARDPACK=$shardpack CSV=$work/data/list.csv PARTS_DIR=$1 PARTS=$2 JOB_COMPLETION_INDEX=$k \
        BUILD_OPTIONS="--classes $work/data/class_dict.csv $3" "$src/scripts/k8s/pack_part.sh" \
            > "$1.pod-$k.log" 2>&1 &
        pids+=($!)
    done
    local failed=0
    for k in "${!pids[@]}"; do wait "${pids[$k]}" || { echo "pod $k failed:"; cat "$1.pod-$k.log"; failed=1; }; done
    return $failed
}

pods "$work/parts" 4 "$options" || fail "the pods"
SHARDPACK=$shardpack OUT=$work/merged PARTS_DIR=$work/parts "$src/scripts/k8s/merge.sh" > "$work/merge.log" 2>&1 ||
    { cat "$work/merge.log"; fail "merge.sh"; }
single_hash=$("$shardpack" inspect --json "$work/single" | grep -o '"content_hash": "[0-9a-f]*"')
merged_hash=$("$shardpack" inspect --json "$work/merged" | grep -o '"content_hash": "[0-9a-f]*"')
echo "one machine: $single_hash; merged from 4 indexed pods: $merged_hash"
[[ -n "$single_hash" && "$single_hash" == "$merged_hash" ]] || fail "content hashes differ"
cmp "$work/single/manifest.json" "$work/merged/manifest.json" || fail "manifests differ"
shards=0
for f in "$work"/single/shard-*.spk; do
    cmp "$f" "$work/merged/$(basename "$f")" || fail "$(basename "$f") differs"
    shards=$((shards + 1))
done
[[ $shards -gt 1 ]] || fail "expected several shards, got $shards"
echo "merged dataset == one-machine build: same manifest.json and $shards identical shards"

# A pod that never succeeded: the merge refuses, naming the part.
cp -r "$work/parts" "$work/missing"
rm -rf "$work/missing/part-00002"
"$shardpack" merge --out "$work/merged-missing" "$work/missing" > "$work/missing.out" 2>&1
code=$?
cat "$work/missing.out"
[[ $code -eq 1 ]] || fail "merge without part 2 exited $code, expected 1"
grep -q "missing part 2 of 4" "$work/missing.out" || fail "the refusal does not name part 2"
[[ ! -e "$work/merged-missing/manifest.json" ]] || fail "the refused merge published a dataset"

# A part of another build (another seed) in place of part 2: refused as foreign.
pods "$work/other" 4 "${options/--seed 7/--seed 8}" || fail "the other build's pods"
cp -r "$work/parts" "$work/foreign"
rm -rf "$work/foreign/part-00002"
cp -r "$work/other/part-00002" "$work/foreign/part-00002"
"$shardpack" merge --out "$work/merged-foreign" "$work/foreign" > "$work/foreign.out" 2>&1
code=$?
cat "$work/foreign.out"
[[ $code -eq 1 ]] || fail "merge with a foreign part 2 exited $code, expected 1"
grep -q "part-00002" "$work/foreign.out" || fail "the refusal does not name the foreign part"
[[ ! -e "$work/merged-foreign/manifest.json" ]] || fail "the refused merge published a dataset"
echo "PASSED"
