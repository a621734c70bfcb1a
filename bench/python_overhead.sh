#!/usr/bin/env bash
# The cost of the Python binding: the same loader loop run by `stoke bench load` (C++) and by
# bench/python_loader.py (stoke.Loader, batches as torch tensors and as numpy arrays), on the same
# table with the same options, alternating C++ / torch / numpy for BENCH_REPS rounds with a warm page
# cache. Prints the median samples/s of each and the Python rates as a share of the C++ rate.
#   bench/python_overhead.sh [STOKE_BIN]    env: BENCH_SAMPLES (default 8000: fits the page cache of
#   a small machine), BENCH_DIR (default build/bench-python), BENCH_TABLE (use this table instead of
#   generating one), BENCH_WHERE (only rows matching this predicate), BENCH_BATCHES (measured batches
#   per run, default 2000), BENCH_REPS (default 3), BENCH_KEEP=1 keeps the generated table.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-8000}
work=${BENCH_DIR:-build/bench-python}
batches=${BENCH_BATCHES:-2000}
reps=${BENCH_REPS:-3}
where=${BENCH_WHERE:-}
py=/usr/bin/python3
pypath=$(dirname "$stoke")/python

die() { echo "python_overhead: $*" >&2; exit 1; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
compgen -G "$pypath/stoke/_stoke*.so" >/dev/null || die "no stoke Python module in $pypath (build the _stoke target)"

table=${BENCH_TABLE:-}
if [ -z "$table" ]; then
  table=$work/table
  if [ ! -d "$table/_delta_log" ] || [ "$("$stoke" query "$table" --count)" -ne "$samples" ]; then
    echo "python_overhead: writing $samples volumes and ingesting them into $table" >&2
    rm -rf "$work"
    mkdir -p "$work"
    "$stoke" --no-progress synth volumes --samples "$samples" --seed 0 --out "$work/volumes" >/dev/null
    "$stoke" --no-progress ingest "$work/volumes" --labels "$work/volumes/labels.csv" --table "$table" \
      --tensor-column volume >/dev/null
    rm -rf "$work/volumes"
  fi
fi
where_args=()
if [ -n "$where" ]; then where_args=(--where "$where"); fi

echo "python_overhead: warming the page cache with $table" >&2
find "$table" -name '*.parquet' -exec cat {} + >/dev/null

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for rep in $(seq "$reps"); do
  echo "python_overhead: round $rep of $reps" >&2
  "$stoke" bench load "$table" --batches "$batches" --warmup-batches 50 "${where_args[@]}" --json >>"$results"
  for to in torch numpy; do
    PYTHONPATH=$pypath "$py" bench/python_loader.py "$table" --to "$to" --batches "$batches" --warmup-batches 50 \
      "${where_args[@]}" --json >>"$results"
  done
done

"$py" - "$results" "$table" "$batches" "$reps" <<'PY'
import json, statistics, sys
path, table, batches, reps = sys.argv[1:]
rates = {}
for line in open(path):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rates.setdefault(r["tool"], []).append(r["samples_per_s"])
cpp = statistics.median(rates["stoke"])
print(f"loader from C++ and from Python on {table}: {batches} batches of 32 per run, median of {reps} alternating runs, warm")
print(f"{'run':<22} {'samples/s':>10} {'of C++':>8}   runs")
for tool in ("stoke", "stoke-python-torch", "stoke-python-numpy"):
    med = statistics.median(rates[tool])
    name = "stoke bench load (C++)" if tool == "stoke" else tool
    print(f"{name:<22} {med:>10.0f} {med / cpp:>7.1%}   " + ", ".join(f"{x:.0f}" for x in rates[tool]))
PY
if [ -z "${BENCH_KEEP:-}" ] && [ -z "${BENCH_TABLE:-}" ]; then rm -rf "$work"; fi
