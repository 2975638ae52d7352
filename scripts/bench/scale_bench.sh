#!/usr/bin/env bash
# The measurements behind the capacity plan, scripts/bench/scaling.md: per-core packing rates of the
# benchmark's jobs (1 thread and 2 threads), and `shardpack merge` times for 4 and 64 parts.
# Prints one line per measurement (medians of REPS runs) and writes them to OUT/scale.json.
#
#   scripts/bench/scale_bench.sh [BIN_DIR] [OUT_DIR]     defaults: build, out/scale
set -euo pipefail
bin=$(cd "${1:-build}" && pwd)
out=${2:-out/scale}
reps=${REPS:-3}
n_merge=${N_MERGE:-2000}
mkdir -p "$out"
work=$(cd "$out" && pwd)
json="$work/scale.json"
echo "[" > "$json"
first=1
emit() {  # NAME KEY=VALUE...
    local name=$1; shift
    echo "$name $*"
    local fields="\"name\":\"$name\""
    for kv in "$@"; do fields+=",\"${kv%%=*}\":${kv#*=}"; done
    [[ $first -eq 1 ]] || echo "," >> "$json"
    first=0
    echo "{$fields}" >> "$json"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }

gen() { [[ -f "$1/list.csv" ]] || "$bin/make_sample_data" --out "$@" > /dev/null; }
gen "$work/src/seg1080" --task seg --count 24 --width 1920 --height 1080
gen "$work/src/jpeg500" --task cls --jpeg --count 400 --width 500 --height 375 --seed 2
gen "$work/src/jpeg1600" --task cls --jpeg --count 60 --width 1600 --height 1200 --seed 3
gen "$work/src/merge" --task cls --jpeg --count "$n_merge" --width 500 --height 375 --seed 4

# --- packing rate per core ------------------------------------------------------------------
pack_rate() {  # NAME SRC THREADS ARGS...
    local name=$1 src=$2 threads=$3; shift 3
    local rows runs=()
    rows=$(($(wc -l < "$src/list.csv") - 1))
    cat "$src"/*/* > /dev/null 2>&1 || true  # warm the page cache: CPU, not disk, is measured
    for _ in $(seq "$reps"); do
        rm -rf "$work/pack.ds"
        runs+=("$(seconds "$bin/shardpack" -q build --csv "$src/list.csv" --out "$work/pack.ds" --threads "$threads" --full "$@")")
    done
    local s
    s=$(printf '%s\n' "${runs[@]}" | median)
    local bytes
    bytes=$(du -sb "$work/pack.ds" | cut -f1)
    emit "$name.threads$threads" rows="$rows" seconds="$s" per_second="$(echo "$rows / $s" | bc -l | xargs printf '%.1f')" \
        stored_bytes_per_record="$((bytes / rows))"
}
for t in 1 2; do
    pack_rate pack.seg1080 "$work/src/seg1080" "$t" --classes "$work/src/seg1080/class_dict.csv" --size 512x512 --resize none
    pack_rate pack.jpeg500 "$work/src/jpeg500" "$t" --size 224x224 --resize shorter
    pack_rate pack.jpeg1600 "$work/src/jpeg1600" "$t" --size 224x224 --resize shorter
done

# --- merge ----------------------------------------------------------------------------------
opts=(--size 224x224 --resize shorter --shard-size 16MiB)
rm -rf "$work/merge.single"
"$bin/shardpack" -q build --csv "$work/src/merge/list.csv" --out "$work/merge.single" "${opts[@]}"
single_hash=$("$bin/shardpack" inspect --json "$work/merge.single" | grep -o '"content_hash": "[0-9a-f]*"')
for n in 4 64; do
    rm -rf "$work/parts.$n"
    for k in $(seq 0 $((n - 1))); do
        "$bin/shardpack" -q build --csv "$work/src/merge/list.csv" --out "$work/parts.$n/part-$k" --partition "$k/$n" "${opts[@]}"
    done
    for link in hard copy; do
        runs=()
        for _ in $(seq "$reps"); do
            rm -rf "$work/merged.$n"
            sync
            runs+=("$(seconds "$bin/shardpack" -q merge --out "$work/merged.$n" --link "$link" "$work/parts.$n")")
        done
        s=$(printf '%s\n' "${runs[@]}" | median)
        bytes=$(du -sb --apparent-size "$work/merged.$n" | cut -f1)
        report=$(cat "$work/merged.$n/report.json")
        linked=$(grep -o '"shards_linked": [0-9]*' <<< "$report" | grep -o '[0-9]*$')
        shards=$(grep -o '"shards": [0-9]*' <<< "$report" | grep -o '[0-9]*$')
        hash=$("$bin/shardpack" inspect --json "$work/merged.$n" | grep -o '"content_hash": "[0-9a-f]*"')
        [[ "$hash" == "$single_hash" ]] || { echo "merge of $n parts differs from the one-machine build" >&2; exit 1; }
        emit "merge.parts$n.$link" records="$n_merge" bytes="$bytes" shards="$shards" shards_linked="$linked" seconds="$s" \
            mb_per_second="$(echo "$bytes / $s / 1000000" | bc -l | xargs printf '%.0f')"
    done
done
# The floor: copying the same bytes with cp, and hashing them (what a merge must at least do).
rm -rf "$work/copy"
sync
s=$(seconds cp -r "$work/merge.single" "$work/copy")
emit copy.floor bytes="$(du -sb --apparent-size "$work/merge.single" | cut -f1)" seconds="$s"
echo "]" >> "$json"
echo "wrote $json (merged datasets equal the one-machine build: $single_hash)"
