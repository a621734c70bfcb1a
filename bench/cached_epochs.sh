#!/usr/bin/env bash
# Later epochs of an object-store table read through the read cache (--cache-dir), against the same
# samples read warm from a local table, at several sample sizes, with default options.
# For each size: `stoke synth volumes` and `stoke ingest` (no options) make a local table and the same
# table on the Azure emulator (Azurite, with no proxy: a later epoch makes no request); one epoch
# through a fresh cache directory fills the cache; then BENCH_REPS (default 3) rounds of a later epoch
# through the cache (`stoke bench load az://... --cache-dir DIR`) and of the local table, warm (its
# files read once before), alternating; batches of 1,024 up to 16 KiB and of 32 above, global
# shuffle, about BENCH_SECONDS (default 6) each. With a second binary B, B's cached run joins each
# round (A cached, B cached, A local, each round starting one run later): for a change to the
# cache's path.
#   bench/cached_epochs.sh [STOKE_BIN [B_STOKE_BIN]]   env: BENCH_DIR (default build/bench-cached),
#   BENCH_REPS, BENCH_SECONDS, BENCH_SIZES (a subset of "512 16k 115k 360k 4m", default "512 16k 360k"),
#   BENCH_SCALE (divides the sample counts), BENCH_PYTHON (default /usr/bin/python3).
# Raw JSON lines go to BENCH_DIR/results.jsonl; the table goes to stdout.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh  # size_spec, batches_for_seconds
a=${1:-build/stoke}
b=${2:-}
work=${BENCH_DIR:-build/bench-cached}
reps=${BENCH_REPS:-3}
seconds=${BENCH_SECONDS:-6}
sizes=${BENCH_SIZES:-"512 16k 360k"}
py=${BENCH_PYTHON:-/usr/bin/python3}

die() { echo "cached_epochs: $*" >&2; exit 1; }
note() { echo "cached_epochs: $*" >&2; }
[ -x "$a" ] || die "no stoke binary at '$a'"
[ -z "$b" ] || [ -x "$b" ] || die "no stoke binary at '$b'"
source tests/servers/servers.sh
start_test_server azurite azurite
AZURE_STORAGE_CONNECTION_STRING=$(azurite_connection_string "$port")
export AZURE_STORAGE_CONNECTION_STRING
rm -rf "$work"
mkdir -p "$work"
results=$work/results.jsonl
: >"$results"
last_json() { grep -E '^\{' | tail -1; }
# run LABEL SIZE ROUND STOKE ARGS...: one `stoke bench load`, its JSON line tagged into results.
run() {
  local label=$1 size=$2 round=$3 bin=$4 r
  shift 4
  r=$("$bin" bench load "$@" --json | last_json)
  printf '{"size":"%s","run":"%s","round":%d,%s\n' "$size" "$label" "$round" "${r#\{}" >>"$results"
}

for size in $sizes; do
  sp=$(size_spec "$size") || die "unknown size '$size' (expected 512 16k 115k 360k 4m)"
  read -r shape channels n <<<"$sp"
  n=$((n / ${BENCH_SCALE:-1}))
  batch=32
  if [ "$size" = 512 ] || [ "$size" = 16k ]; then batch=1024; fi
  vol=$work/$size/volumes local=$work/$size/table remote=az://bench$size/table cache=$work/$size/cache
  note "$size: writing $n samples, ingesting them locally and on the emulator"
  "$a" --no-progress synth volumes --samples "$n" --shape "$shape" --channels "$channels" --out "$vol" >/dev/null
  "$a" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$local" >/dev/null
  "$a" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$remote" >/dev/null
  rm -rf "$vol"
  note "$size: the first epoch through the cache fills it"
  "$a" bench load "$remote" --batch-size "$batch" --cache-dir "$cache" >/dev/null
  find "$local" -name '*.parquet' -print0 | xargs -0 cat >/dev/null
  batches=$(batches_for_seconds "$a" "$local" "$batch" "$seconds")
  common=(--batch-size "$batch" --batches "$batches" --warmup-batches 4)
  runs=(cached local)
  if [ -n "$b" ]; then runs=(cached cached-B local); fi
  for i in $(seq 1 "$reps"); do
    # Each round starts one run later than the one before: every run takes every place in turn.
    order=()
    for j in "${!runs[@]}"; do order+=("${runs[$(((i - 1 + j) % ${#runs[@]}))]}"); done
    note "$size: round $i (${order[*]}, $batches batches of $batch)"
    for which in "${order[@]}"; do
      case $which in
        cached) run cached "$size" "$i" "$a" "$remote" "${common[@]}" --cache-dir "$cache" ;;
        cached-B) run cached-B "$size" "$i" "$b" "$remote" "${common[@]}" --cache-dir "$cache" ;;
        local) run local "$size" "$i" "$a" "$local" "${common[@]}" ;;
      esac
    done
  done
  rm -rf "${work:?}/$size"
done

echo
echo "later epochs through the read cache against the local table, warm, default options, global shuffle," \
  "$reps rounds, medians; $(nproc) cores"
echo "A: $a"
if [ -n "$b" ]; then echo "B: $b"; fi
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = [r for r in dict.fromkeys(x["run"] for x in rows)]
heads = [f"{r} samples/s" for r in runs] + [f"{r} / local" for r in runs if r != "local"]
print(("{:<6}" + " {:>18}" * len(heads)).format("sample", *heads))
for size in dict.fromkeys(r["size"] for r in rows):
    med = {run: statistics.median(x["samples_per_s"] for x in rows if x["size"] == size and x["run"] == run)
           for run in runs}
    mapped = {run: statistics.median(x["reads_mapped"] for x in rows if x["size"] == size and x["run"] == run)
              for run in runs}
    cells = [f"{med[r]:,.0f}" for r in runs] + [f"{med[r] / med['local']:.2f}" for r in runs if r != "local"]
    print(("{:<6}" + " {:>18}" * len(cells)).format(size, *cells),
          " reads mapped: " + ", ".join(f"{r} {mapped[r]:,.0f}" for r in runs))
PY
