#!/usr/bin/env bash
# Two builds of stoke side by side: `stoke bench load` of each over the same tables, in alternated
# pairs (A, B, A, B, ...), warm (cold with BENCH_AB_COLD=1), with default options, at the sample
# sizes of sample_sizes.sh. For a change to the loader: is B (the change) within noise of A (the
# build before it)?
# For each size: `stoke synth volumes` and `stoke ingest` (no options, by B) make the table; its files
# are read once (cat); then BENCH_AB_REPS pairs (default 5) of `stoke bench load` (batches of
# BENCH_BATCH, default 32, global shuffle, about BENCH_SECONDS each, default 6), the order within a
# pair alternating too; after each pair `stoke bench memcpy` (B's), the memory-copy limit of the same
# batches with as many threads as the loader had workers (warm only).
# With BENCH_AB_COLD=1 every run reads with O_DIRECT (`--cold`): the page cache plays no part.
# Reported per size: each build's median samples/s, the median of the per-pair ratios B/A and
# (warm) B's median share of the memory-copy limit.
#   bench/builds_ab.sh A_STOKE B_STOKE   env: BENCH_DIR (default build/bench-ab), BENCH_AB_REPS,
#   BENCH_SECONDS, BENCH_BATCH, BENCH_SIZES (a subset of "512 16k 115k 360k 4m"), BENCH_SCALE (divides the sample
#   counts), BENCH_PYTHON (default /usr/bin/python3), BENCH_KEEP=1 keeps the data.
# Raw JSON lines go to BENCH_DIR/results.jsonl; the table goes to stdout.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh  # size_spec, batches_for_seconds
a=${1:?usage: bench/builds_ab.sh A_STOKE B_STOKE}
b=${2:?usage: bench/builds_ab.sh A_STOKE B_STOKE}
work=${BENCH_DIR:-build/bench-ab}
reps=${BENCH_AB_REPS:-5}
seconds=${BENCH_SECONDS:-6}
sizes=${BENCH_SIZES:-"512 16k 115k 360k 4m"}
py=${BENCH_PYTHON:-/usr/bin/python3}
batch=${BENCH_BATCH:-32}
cold=()
if [ "${BENCH_AB_COLD:-0}" = 1 ]; then cold=(--cold); fi

die() { echo "builds_ab: $*" >&2; exit 1; }
note() { echo "builds_ab: $*" >&2; }
[ -x "$a" ] || die "no stoke binary at '$a'"
[ -x "$b" ] || die "no stoke binary at '$b'"
mkdir -p "$work"
results=$work/results.jsonl
: >"$results"
last_json() { grep -E '^\{' | tail -1; }

for size in $sizes; do
  sp=$(size_spec "$size") || die "unknown size '$size' (expected 512 16k 115k 360k 4m)"
  read -r shape channels n <<<"$sp"
  n=$((n / ${BENCH_SCALE:-1}))
  vol=$work/$size/volumes table=$work/$size/table
  if [ "$(cat "$work/$size/spec" 2>/dev/null)" != "$shape $channels $n" ] || [ ! -d "$table/_delta_log" ]; then
    note "$size: writing and ingesting $n samples"
    rm -rf "$work/$size"
    "$b" --no-progress synth volumes --samples "$n" --shape "$shape" --channels "$channels" --out "$vol" >/dev/null
    "$b" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$table" >/dev/null
    echo "$shape $channels $n" >"$work/$size/spec"
  fi
  find "$table" -name '*.parquet' -print0 | xargs -0 cat >/dev/null
  batches=$(batches_for_seconds "$b" "$table" "$batch" "$seconds" "${cold[@]}")
  for i in $(seq 1 "$reps"); do
    order="A B"
    if [ $((i % 2)) -eq 0 ]; then order="B A"; fi
    note "$size: pair $i ($order, $batches batches)"
    for which in $order; do
      bin=$a
      if [ "$which" = B ]; then bin=$b; fi
      r=$("$bin" bench load "$table" --batch-size "$batch" --shuffle global --batches "$batches" --warmup-batches 4 \
        "${cold[@]}" --json | last_json)
      printf '{"size":"%s","build":"%s","pair":%d,%s\n' "$size" "$which" "$i" "${r#\{}" >>"$results"
    done
    if [ ${#cold[@]} -eq 0 ]; then
      workers=$("$py" -c 'import json, sys; print(json.loads(sys.argv[1])["workers"])' "$r")
      m=$("$b" bench memcpy "$table" --batch-size "$batch" --threads "$workers" --seconds "$seconds" --json | last_json)
      printf '{"size":"%s","build":"memcpy","pair":%d,%s\n' "$size" "$i" "${m#\{}" >>"$results"
    fi
  done
  if [ "${BENCH_KEEP:-0}" != 1 ]; then rm -rf "$work/$size"; fi
done

echo
echo "two builds of stoke, $([ ${#cold[@]} -gt 0 ] && echo "cold (O_DIRECT)" || echo warm), default options, batches of $batch, global shuffle, $reps alternated pairs;" \
  "$(nproc) cores"
echo "A: $a"
echo "B: $b"
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
fmt = "{:<6} {:>12} {:>12} {:>14} {:>16} {:>14} {:>10}"
print(fmt.format("sample", "A samples/s", "B samples/s", "B/A (median)", "B/A (min-max)", "memcpy", "B/memcpy"))
for size in dict.fromkeys(r["size"] for r in rows):
    by = {(r["build"], r["pair"]): r["samples_per_s"] for r in rows if r["size"] == size}
    pairs = sorted({p for _, p in by})
    ratios = [by[("B", p)] / by[("A", p)] for p in pairs]
    a = statistics.median(by[("A", p)] for p in pairs)
    b = statistics.median(by[("B", p)] for p in pairs)
    m, share = "-", "-"
    if all(("memcpy", p) in by for p in pairs):
        m = f'{statistics.median(by[("memcpy", p)] for p in pairs):,.0f}'
        share = f'{statistics.median(by[("B", p)] / by[("memcpy", p)] for p in pairs):.0%}'
    print(fmt.format(size, f"{a:,.0f}", f"{b:,.0f}", f"{statistics.median(ratios):.3f}",
                     f"{min(ratios):.2f}-{max(ratios):.2f}", m, share))
PY
