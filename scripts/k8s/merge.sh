#!/usr/bin/env bash
# Merges the parts in $PARTS_DIR into $OUT and verifies it (merge-job.yaml's pod, run once the
# Indexed Job completed). The merge refuses a missing, duplicate or foreign part by name.
set -euo pipefail
: "${OUT:?}" "${PARTS_DIR:?}"
SHARDPACK=${SHARDPACK:-shardpack}
echo "$(date -u +%FT%TZ) $(hostname): merging $PARTS_DIR -> $OUT"
"$SHARDPACK" merge --out "$OUT" --link "${MERGE_LINK:-hard}" "$PARTS_DIR"
"$SHARDPACK" verify "$OUT"
