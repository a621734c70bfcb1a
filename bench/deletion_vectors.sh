#!/usr/bin/env bash
# What deletion vectors cost, with default options, against the same table without them:
#  1. Load: a table of N volumes (two sample sizes) and a copy of it in which `stoke bench
#     delete-rows` deleted 10 % of every file's rows at random (one DV file, as a DELETE of Spark or
#     Databricks writes it). `stoke bench load` (defaults: batches of 32, global shuffle), warm,
#     alternated pairs; the median samples/s of each, and their ratio (target: >= 0.90).
#  2. Open: 200,000 tiny volumes in 100,000 data files of 2 rows, and a copy with one row of every
#     file deleted (100,000 DVs). Timed: `stoke inspect` (the snapshot: checkpoint and log; median of
#     5), and the loader's open_s (`stoke bench load --batches 1`: snapshot, DVs, sample index), with
#     the index built and from its _stoke/ cache (median of 3). Target: DVs within 2x.
#   bench/deletion_vectors.sh [STOKE_BIN]    env: BENCH_DV_PAIRS (default 3), BENCH_DV_EPOCHS (default 3),
#   BENCH_DIR (default build/bench-dv), BENCH_KEEP=1 keeps the volumes and tables for a later run
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
pairs=${BENCH_DV_PAIRS:-3}
epochs=${BENCH_DV_EPOCHS:-3}
work=${BENCH_DIR:-build/bench-dv}
py=/usr/bin/python3

die() { echo "deletion_vectors: $*" >&2; exit 1; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
grep -qE '^ +delete-rows( |$)' <<<"$("$stoke" bench --help 2>&1 || true)" ||
  die "'$stoke bench delete-rows' is missing: build a stoke that has it (src/bench/delete_rows.cc)"
mkdir -p "$work"

# tables NAME N SHAPE CHANNELS ROWS_PER_FILE FRACTION: $work/NAME/{vol,t,t_dv}, reused when t_dv is
# there with its DELETE commit (BENCH_KEEP).
tables() {
  local name=$1 n=$2 shape=$3 channels=$4 rows_per_file=$5 fraction=$6 d=$work/$1
  if [ -d "$d/t_dv/_delta_log" ] && [ "$("$stoke" query "$d/t" --count)" -eq "$n" ]; then return; fi
  rm -rf "$d"
  echo "deletion_vectors: $name: writing $n volumes ($shape x $channels float32) and their tables" >&2
  "$stoke" --no-progress synth volumes --samples "$n" --shape "$shape" --channels "$channels" --seed 0 \
    --out "$d/vol" >/dev/null
  local per_file=()
  if [ "$rows_per_file" != default ]; then per_file=(--rows-per-file "$rows_per_file"); fi
  "$stoke" --no-progress ingest "$d/vol" --labels "$d/vol/labels.csv" --table "$d/t" "${per_file[@]}" >/dev/null
  cp -r "$d/t" "$d/t_dv"
  "$stoke" bench delete-rows "$d/t_dv" --fraction "$fraction" --seed 1 >&2
  rm -rf "$d/vol"  # the tables hold the samples
}

# json_field FIELD: FIELD of the last JSON line on stdin.
json_field() {
  "$py" -c '
import json, sys
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
if not lines:
    sys.exit("deletion_vectors: no JSON line from stoke")
print(json.loads(lines[-1])[sys.argv[1]])' "$1"
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# load NAME: alternated pairs of `stoke bench load` on t and t_dv; prints a row of the table.
load() {
  local d=$work/$1 plain=() dv=() i
  "$stoke" bench load "$d/t" --epochs 1 --json >/dev/null  # warms the page cache and the index caches
  "$stoke" bench load "$d/t_dv" --epochs 1 --json >/dev/null
  for ((i = 0; i < pairs; i++)); do
    plain+=("$("$stoke" bench load "$d/t" --epochs "$epochs" --json | json_field samples_per_s)")
    dv+=("$("$stoke" bench load "$d/t_dv" --epochs "$epochs" --json | json_field samples_per_s)")
  done
  local a b
  a=$(median "${plain[@]}")
  b=$(median "${dv[@]}")
  printf '%-36s %14.0f %14.0f %8.2f\n' "$2" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
}

# inspect_ms TABLE: median wall time of 5 `stoke inspect`, in ms.
inspect_ms() {
  local runs=() t0 t1
  "$stoke" inspect "$1" >/dev/null
  for _ in 1 2 3 4 5; do
    t0=$(date +%s%N)
    "$stoke" inspect "$1" >/dev/null
    t1=$(date +%s%N)
    runs+=($(( (t1 - t0) / 1000000 )))
  done
  median "${runs[@]}"
}

# open_ms TABLE none|cached: median loader open_s of 3, in ms; none removes the index cache first.
open_ms() {
  local runs=() s
  "$stoke" bench load "$1" --batches 1 --json >/dev/null  # builds the cache, warms the files
  for _ in 1 2 3; do
    if [ "$2" = none ]; then rm -rf "$1/_stoke"; fi
    s=$("$stoke" bench load "$1" --batches 1 --json | json_field open_s)
    runs+=("$(awk -v s="$s" 'BEGIN { print s * 1000 }')")
  done
  median "${runs[@]}"
}

open_row() {
  local a b
  a=$2
  b=$3
  printf '%-36s %14.0f %14.0f %8.2f\n' "$1" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
}

tables small 100000 8,8,8 1 default 0.1
tables large 20000 16,16,16 4 default 0.1
tables open 200000 4,4,4 2 2 0.5

echo
echo "deletion vectors on 10 % of the rows: stoke bench load, default options, warm, median of $pairs alternated pairs of $epochs epochs"
printf '%-36s %14s %14s %8s\n' "table" "samples/s" "with DVs" "ratio"
load small "100,000 samples of 2 KiB"
load large "20,000 samples of 64 KiB"
echo
echo "open a table of 100,000 files, without and with a DV on each (100,000 DVs), warm"
printf '%-36s %14s %14s %8s\n' "" "ms" "with DVs ms" "ratio"
open_row "stoke inspect (median of 5)" "$(inspect_ms "$work/open/t")" "$(inspect_ms "$work/open/t_dv")"
open_row "loader open, index built (of 3)" "$(open_ms "$work/open/t" none)" "$(open_ms "$work/open/t_dv" none)"
open_row "loader open, index cached (of 3)" "$(open_ms "$work/open/t" cached)" "$(open_ms "$work/open/t_dv" cached)"
if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$work"; fi
