#!/usr/bin/env bash
# Time for the loader to open a table of many samples in many files: N tiny volumes (4x4x4x2
# float32, 512 B each) ingested into F data files of N/F rows, then `stoke bench load T --batches 1`
# reports open_s (the sample index built from every file's footer and OffsetIndex, or read from
# its cache under T/_stoke/), median of 3 runs: without the cache (removed before each run) and with
# it; with a warm page cache, and a cold one (dropped before each run; root only).
#   bench/loader_open.sh [STOKE_BIN]    env: BENCH_OPEN_SAMPLES (default 200000), BENCH_OPEN_FILES
#   (default 500), BENCH_DIR (default build/bench-loader-open), BENCH_KEEP=1 keeps the volumes and the
#   table (a later run with the same sizes reuses them)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh  # can_drop, drop_caches
stoke=${1:-build/stoke}
samples=${BENCH_OPEN_SAMPLES:-200000}
files=${BENCH_OPEN_FILES:-500}
work=${BENCH_DIR:-build/bench-loader-open}
py=/usr/bin/python3

die() { echo "loader_open: $*" >&2; exit 1; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
# `stoke bench load --help` would print the group's help and succeed even without `load`.
bench_help=$("$stoke" bench --help 2>&1 || true)
grep -qE '^ +load( |$)' <<<"$bench_help" ||
  die "'$stoke bench load' is missing: build a stoke that has the loader benchmark (src/bench/load_bench.*)"
if [ "$files" -lt 1 ] || [ "$samples" -lt "$files" ]; then die "need BENCH_OPEN_SAMPLES >= BENCH_OPEN_FILES >= 1"; fi
rows_per_file=$(( (samples + files - 1) / files ))
data_files=$(( (samples + rows_per_file - 1) / rows_per_file ))

vol=$work/volumes
table=$work/table
mkdir -p "$work"
have=0
if [ -d "$vol" ]; then have=$(find "$vol" -maxdepth 1 -name '*.npy' | wc -l); fi
if [ "$have" -ne "$samples" ]; then
  echo "loader_open: writing $samples volumes to $vol" >&2
  rm -rf "$vol" "$table"
  "$stoke" --no-progress synth volumes --samples "$samples" --shape 4,4,4 --channels 2 --seed 0 --out "$vol" >/dev/null
fi
have=0
if [ -d "$table/_delta_log" ]; then
  have=$(find "$table" \( -name _delta_log -o -name _stoke \) -prune -o -name '*.parquet' -print | wc -l)
fi
if [ "$have" -ne "$data_files" ]; then
  echo "loader_open: ingesting them into $table ($data_files files of $rows_per_file rows)" >&2
  rm -rf "$table"
  "$stoke" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$table" --rows-per-file "$rows_per_file" \
    >/dev/null
fi

# open_s MODE CACHE: median open_s of 3 runs, in seconds. MODE warm|cold (cold drops the page cache
# before each run); CACHE none|cached (none removes T/_stoke before each run). Checks that the
# loader says it used the cache exactly when there was one.
open_s() {
  local mode=$1 cache=$2 runs=() out
  "$stoke" bench load "$table" --batches 1 --json >/dev/null  # builds the cache, warms the files
  for _ in 1 2 3; do
    if [ "$cache" = none ]; then rm -rf "$table/_stoke"; fi
    if [ "$mode" = cold ]; then drop_caches; fi
    out=$("$stoke" bench load "$table" --batches 1 --json)
    runs+=("$("$py" -c '
import json, sys
lines = [l for l in sys.argv[1].splitlines() if l.startswith("{")]
if not lines:
    sys.exit("loader_open: no JSON line from stoke bench load: " + sys.argv[1])
r = json.loads(lines[-1])
want = sys.argv[2] == "cached"
got = r["index_from_cache"]
if got != want:
    print(f"loader_open: warning: index_from_cache is {got}, expected {want}", file=sys.stderr)
print(r["open_s"])' "$out" "$cache")")
  done
  printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p
}

warm_none=$(open_s warm none)
warm_cached=$(open_s warm cached)
cold_none=n/a cold_cached=n/a
if [ "$can_drop" = 1 ]; then
  cold_none=$(open_s cold none)
  cold_cached=$(open_s cold cached)
fi

echo
echo "stoke bench load: open a table of $samples samples in $data_files files ($rows_per_file rows each); open_s, median of 3"
"$py" - "$warm_none" "$warm_cached" "$cold_none" "$cold_cached" "$can_drop" <<'PY'
import sys
wn, wc, cn, cc, can_drop = sys.argv[1:6]
def ms(v):
    return "n/a" if v == "n/a" else f"{float(v) * 1000:.1f}"
def speedup(a, b):
    return "" if "n/a" in (a, b) or float(b) <= 0 else f"{float(a) / float(b):.1f}x"
fmt = "{:<34} {:>12} {:>12}"
print(fmt.format("sample index", "warm ms", "cold ms"))
print(fmt.format("built (no _stoke/ cache)", ms(wn), ms(cn)))
print(fmt.format("from the _stoke/ cache", ms(wc), ms(cc)))
print(fmt.format("speed-up from the cache", speedup(wn, wc), speedup(cn, cc)))
if can_drop != "1":
    print("cold: skipped (not root: cannot drop the page cache)")
PY
if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$vol" "$table"; fi
