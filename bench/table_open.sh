#!/usr/bin/env bash
# Time to open a table of N commits (default 10,000), with and without checkpoints: one real
# ingest creates the table, a generator appends N-1 single-file commits to its log (as another
# engine's writers would; opening reads only the log), then `stoke inspect` (a full snapshot
# replay) is timed: from JSON commits alone, from a checkpoint at the last multiple of 10 (what
# stoke and Spark write automatically) plus the commits after it; warm, and cold (page cache dropped
# before each run, when run as root).
#   bench/table_open.sh [STOKE_BIN]    env: BENCH_COMMITS (default 10000), BENCH_DIR (default build/bench-open),
#   BENCH_KEEP=1 keeps the table for a closer look
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
commits=${BENCH_COMMITS:-10000}
work=${BENCH_DIR:-build/bench-open}
[ -n "${BENCH_KEEP:-}" ] || rm -rf "$work"
mkdir -p "$work"
"$stoke" --no-progress synth volumes --samples 1 --shape 2,2,2 --channels 1 --out "$work/src" >/dev/null
"$stoke" --no-progress ingest "$work/src" --labels "$work/src/labels.csv" --table "$work/table" >/dev/null
/usr/bin/python3 - "$work/table/_delta_log" "$commits" <<'PY'
import json, sys, time
log, n = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
for v in range(1, n):
    stats = {"numRecords": 1, "minValues": {"id": v, "label": v % 2}, "maxValues": {"id": v, "label": v % 2},
             "nullCount": {"id": 0, "label": 0}}
    lines = [{"commitInfo": {"timestamp": now + v, "operation": "WRITE", "operationParameters": {"mode": "Append"}}},
             {"add": {"path": f"part-{v:05d}-generated.parquet", "partitionValues": {}, "size": 1000,
                      "modificationTime": now + v, "dataChange": True, "stats": json.dumps(stats)}}]
    with open(f"{log}/{v:020d}.json", "w") as f:
        f.write("".join(json.dumps(l) + "\n" for l in lines))
PY
# Median of 5 runs, in milliseconds; "cold" drops the page cache before each run (root only).
can_drop() { [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
time_open() {
  local mode=$1 runs=() t0 t1
  for _ in 1 2 3 4 5; do
    if [ "$mode" = cold ]; then sync; can_drop || return 1; fi
    t0=$(date +%s%N)
    "$stoke" inspect "$work/table" >/dev/null
    t1=$(date +%s%N)
    runs+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${runs[@]}" | sort -n | sed -n 3p
}
no_checkpoint=$(time_open warm)
no_checkpoint_cold=$(time_open cold || echo n/a)
last=$(( (commits - 1) / 10 * 10 ))
"$stoke" checkpoint "$work/table" --version "$last" >/dev/null
with_checkpoint=$(time_open warm)
with_checkpoint_cold=$(time_open cold || echo n/a)
files=$("$stoke" inspect "$work/table" --json | awk -F': ' '/"files"/ && !done {gsub(/,/, "", $2); print $2; done = 1}')
echo "open a table of $commits commits ($files live files): stoke inspect, median of 5"
printf '%-48s %10s %10s\n' "log" "warm ms" "cold ms"
printf '%-48s %10s %10s\n' "JSON commits only (replay of $commits)" "$no_checkpoint" "$no_checkpoint_cold"
printf '%-48s %10s %10s\n' "checkpoint at $last + $(( commits - 1 - last )) commits" "$with_checkpoint" "$with_checkpoint_cold"
awk -v a="$no_checkpoint" -v b="$with_checkpoint" -v c="$no_checkpoint_cold" -v d="$with_checkpoint_cold" \
  'BEGIN { printf "speed-up from the checkpoint: %.1fx warm", a / b; if (d > 0) printf ", %.1fx cold", c / d; printf "\n" }'
[ -n "${BENCH_KEEP:-}" ] || rm -rf "$work"
