#!/usr/bin/env bash
# One part of a partitioned build, as one pod of a Kubernetes Indexed Job (build-job.yaml):
# Kubernetes sets JOB_COMPLETION_INDEX (0 .. completions-1) in each pod; PARTS must be the Job's
# `completions`. Packs the K-th of N slices of the output order into $PARTS_DIR/part-K, like a
# Slurm array task (scripts/slurm/pack_part.sbatch). A pod that is retried (backoffLimitPerIndex)
# resumes its part incrementally.
#
# tests/k8s/run_k8s_test.sh runs this script as N processes with JOB_COMPLETION_INDEX set (no
# cluster here) and checks the merge against a one-machine build.
set -euo pipefail
: "${CSV:?}" "${PARTS_DIR:?}" "${PARTS:?}" "${JOB_COMPLETION_INDEX:?set by Kubernetes in an Indexed Job}"
SHARDPACK=${SHARDPACK:-shardpack}
part=$(printf 'part-%05d' "$JOB_COMPLETION_INDEX")
echo "$(date -u +%FT%TZ) $(hostname): index $JOB_COMPLETION_INDEX of $PARTS -> $PARTS_DIR/$part"
# shellcheck disable=SC2086 # BUILD_OPTIONS is a list of words
exec "$SHARDPACK" build --csv "$CSV" --out "$PARTS_DIR/$part" --partition "$JOB_COMPLETION_INDEX/$PARTS" \
    ${BUILD_OPTIONS:-}
