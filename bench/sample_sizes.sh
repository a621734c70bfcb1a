#!/usr/bin/env bash
# The loader at five sample sizes, each table ingested with stoke's DEFAULT options (what a user
# gets), against fio at the same block size and queue depth, warm and cold, in one run:
#   512 B, 16 KiB, 115 KB, 360 KB (the seed volume) and 4 MiB float32 samples (random values).
# For each size:
#   - `stoke synth volumes` writes the .npy files, `stoke ingest` (no options) makes the table;
#   - warm: the table's files are read once (cat), then `stoke bench load` (batches of 32, global
#     shuffle) and fio's random reads of one mean page at queue depth 64 (bench/fio_limit.sh,
#     DIRECT=0, block size = the mean page rounded up to 512 B) in alternation, BENCH_WARM_REPS pairs
#     (default 3), reported as the median of the per-pair ratios: fio alone moves by up to a third
#     from one warm run to the next on this machine; after each pair `stoke bench memcpy`, the
#     memory-copy limit (one copy per sample out of the mapped files, no system call, as many
#     threads as the loader had workers), against which stoke is reported too;
#   - cold: `stoke bench load --cold` (O_DIRECT) and fio DIRECT=1 (block size rounded up to 4 KiB)
#     in alternation, BENCH_COLD_REPS pairs (default 3; the page cache is dropped before each stoke
#     run, which needs root; otherwise the cold stoke rows are skipped), each fio run as long as the
#     stoke run before it, reported as the median of the per-pair ratios. fio's buffers are in huge
#     pages where they can be reserved (bench/fio_limit.sh), as stoke's are; fio with its default
#     buffers runs after each pair too, shown as "fio-malloc";
#   - peak RSS of the warm stoke runs against prefetch_bytes + 150 MB: the process's own memory
#     (`max_anonymous_rss_mb` of `stoke bench load --json`, sampled), and in brackets /usr/bin/time's
#     peak (the highest), which includes the pages of data files read through mappings
#     (docs/architecture.md, "Reads out of mappings"): the page cache's, not the loader's.
# At the seed size also PyTorch's DataLoader over the .npy files (bench/torch_dataloader.py,
# num_workers 0 and 2, warm), the naive way.
#   bench/sample_sizes.sh [STOKE_BIN]   env: BENCH_DIR (default build/bench-sizes), BENCH_WARM_REPS, BENCH_COLD_REPS,
#   BENCH_SIZES (a subset of "512 16k 115k 360k 4m"), BENCH_SCALE (divides the sample counts, for a
#   quick check of the script), BENCH_SECONDS (default 8: the length of each run), BENCH_PYTHON
#   (default /usr/bin/python3, with numpy and torch), BENCH_TIME (default /usr/bin/time, GNU time),
#   BENCH_KEEP=1 keeps the data (reused next time).
# Raw JSON lines go to BENCH_DIR/results.jsonl; the table goes to stdout.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh  # can_drop, drop_caches, size_spec, batches_for_seconds
stoke=${1:-build/stoke}
work=${BENCH_DIR:-build/bench-sizes}
warm_reps=${BENCH_WARM_REPS:-3}
cold_reps=${BENCH_COLD_REPS:-3}
sizes=${BENCH_SIZES:-"512 16k 115k 360k 4m"}
py=${BENCH_PYTHON:-/usr/bin/python3}
timebin=${BENCH_TIME:-/usr/bin/time}
batch=32
qd=64
prefetch=536870912  # stoke's default --prefetch-bytes
seconds=${BENCH_SECONDS:-8}  # target length of each stoke and fio run

die() { echo "sample_sizes: $*" >&2; exit 1; }
note() { echo "sample_sizes: $*" >&2; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
[ -x "$timebin" ] || die "$timebin is missing (apt-get install time)"
"$py" -c 'import numpy, torch' 2>/dev/null || die "$py lacks numpy or torch"
mkdir -p "$work"
results=$work/results.jsonl
: >"$results"
jget() { "$py" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# last_json: the last line of stdin that is a JSON object.
last_json() { grep -E '^\{' | tail -1; }
record() { printf '{"size":"%s","run":"%s",%s\n' "$1" "$2" "${3#\{}" >>"$results"; }

for size in $sizes; do
  sp=$(size_spec "$size") || die "unknown size '$size' (expected 512 16k 115k 360k 4m)"
  read -r shape channels n <<<"$sp"
  n=$((n / ${BENCH_SCALE:-1}))
  vol=$work/$size/volumes table=$work/$size/table
  # Data from an earlier BENCH_KEEP run is reused when it was made with the same spec.
  if [ "$(cat "$work/$size/spec" 2>/dev/null)" != "$shape $channels $n" ]; then
    note "$size: writing $n samples"
    rm -rf "$work/$size"
    "$stoke" --no-progress synth volumes --samples "$n" --shape "$shape" --channels "$channels" --out "$vol" >/dev/null
    echo "$shape $channels $n" >"$work/$size/spec"
  fi
  if [ ! -d "$table/_delta_log" ]; then
    note "$size: ingesting with the default options"
    "$stoke" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$table" >/dev/null
  fi
  codecs=$("$stoke" inspect "$table" --json | "$py" -c '
import json, sys
j = json.load(sys.stdin)
print(",".join(sorted(j["column_codecs"].get("data", {}).get("chunks", {}))))')

  # Enough batches for about $seconds: probe one epoch's first batches.
  find "$table" -name '*.parquet' -print0 | xargs -0 cat >/dev/null
  batches=$(batches_for_seconds "$stoke" "$table" "$batch" "$seconds")
  load=("$stoke" bench load "$table" --batch-size "$batch" --shuffle global --batches "$batches" --warmup-batches 4 --json)

  note "$size: warm ($batches batches)"
  r=$("$timebin" -v -o "$work/time.txt" "${load[@]}" | last_json)
  # The probe's rate includes the loader's start (its first batches fault in their slots), so its
  # estimate can give a run of a second or so: measured again, longer, when the run was under half
  # the target length (the short run is then dropped).
  more=$("$py" -c 'import math, sys
wall, secs, b = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print(math.ceil(b * secs / max(wall, 1e-3)) if wall < secs / 2 else 0)' "$(jget "$r" wall_s)" "$seconds" "$batches")
  if [ "$more" -gt 0 ]; then
    batches=$more
    load=("$stoke" bench load "$table" --batch-size "$batch" --shuffle global --batches "$batches" --warmup-batches 4 --json)
    note "$size: warm again ($batches batches)"
    r=$("$timebin" -v -o "$work/time.txt" "${load[@]}" | last_json)
  fi
  page=$(jget "$r" page_bytes_mean)
  bs_warm=$("$py" -c 'import math, sys; print(math.ceil(float(sys.argv[1]) / 512) * 512)' "$page")
  bs_cold=$("$py" -c 'import math, sys; print(math.ceil(float(sys.argv[1]) / 4096) * 4096)' "$page")
  rss_kb=0
  anon_mb=0
  for i in $(seq 1 "$warm_reps"); do
    note "$size: warm pair $i"
    if [ "$i" -gt 1 ]; then r=$("$timebin" -v -o "$work/time.txt" "${load[@]}" | last_json); fi
    record "$size" "warm stoke #$i" "$r"
    rss_kb=$(awk -F': *' -v max="$rss_kb" '/Maximum resident set size/ {print ($2 > max ? $2 : max)}' "$work/time.txt")
    anon_mb=$("$py" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$anon_mb" "$(jget "$r" max_anonymous_rss_mb)")
    # Each measurement into a variable first: a failing command then stops the script (set -e)
    # instead of recording an empty line.
    f=$(bash bench/fio_limit.sh "$table" "$bs_warm" "$qd" 0 "$seconds")
    record "$size" "warm fio #$i" "$f"
    m=$("$stoke" bench memcpy "$table" --batch-size "$batch" --threads "$(jget "$r" workers)" --seconds "$seconds" \
      --json | last_json)
    record "$size" "warm memcpy #$i" "$m"
  done
  printf '{"size":"%s","run":"memory","max_rss_bytes":%d,"max_anonymous_rss_mb":%s,"budget_bytes":%d,"codecs":"%s","samples":%d}\n' \
    "$size" "$((rss_kb * 1024))" "$anon_mb" "$((prefetch + 150000000))" "$codecs" "$n" >>"$results"

  for i in $(seq 1 "$cold_reps"); do
    note "$size: cold pair $i"
    # fio runs as long as the stoke run before it: this virtual disk is faster in short bursts than
    # over tens of seconds, so pairs of unequal length would compare different disks.
    fio_seconds=$seconds
    if [ "$can_drop" = 1 ]; then
      drop_caches
      r=$("${load[@]}" --cold | last_json)
      record "$size" "cold stoke #$i" "$r"
      fio_seconds=$("$py" -c 'import sys; print(max(3, round(float(sys.argv[1]))))' "$(jget "$r" wall_s)")
    fi
    drop_caches
    f=$(bash bench/fio_limit.sh "$table" "$bs_cold" "$qd" 1 "$fio_seconds")
    record "$size" "cold fio #$i" "$f"
    # fio with its default buffers (4 KiB pages), the limit as earlier runs measured it.
    drop_caches
    f=$(FIO_MEM=malloc bash bench/fio_limit.sh "$table" "$bs_cold" "$qd" 1 "$fio_seconds")
    record "$size" "cold fio-malloc #$i" "$f"
  done

  if [ "$size" = 360k ]; then
    find "$vol" -maxdepth 1 -name '*.npy' -print0 | xargs -0 cat >/dev/null
    for w in 0 2; do
      note "$size: PyTorch DataLoader, num_workers $w"
      r=$("$py" bench/torch_dataloader.py "$vol" --num-workers "$w" --batch-size "$batch" \
        --batches $((n / batch)) --warmup-batches 2 --json | last_json)
      record "$size" "warm torch w$w" "$r"
    done
  fi
  if [ "${BENCH_KEEP:-0}" != 1 ]; then rm -rf "$work/$size"; fi
done

echo
echo "stoke across sample sizes, tables ingested with default options: batches of $batch, global shuffle," \
  "queue depth $qd; fio at the same block size and depth; $(nproc) cores"
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sizes = list(dict.fromkeys(r["size"] for r in rows))
def one(size, run):
    return next((r for r in rows if r["size"] == size and r["run"] == run), None)
def pairs_of(size, kind, limit="fio"):
    """(stoke, limit) samples/s of the numbered pairs of `kind` (warm or cold) where both ran."""
    out, i = [], 1
    while one(size, f"{kind} {limit} #{i}"):
        st, fi = one(size, f"{kind} stoke #{i}"), one(size, f"{kind} {limit} #{i}")
        if st:
            out.append((st["samples_per_s"], fi["samples_per_s"]))
        i += 1
    return out
def medians(pairs):
    if not pairs:
        return float("nan"), float("nan"), float("nan")
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
            statistics.median(100 * a / b for a, b in pairs))
fmt = "{:<6} {:>7} {:<14} {:>11} {:>11} {:>15} {:>11} {:>11} {:>15} {:>13} {:>9}"
print(fmt.format("sample", "rows", "data codec", "warm st/s", "warm fio/s", "warm % (median)", "cold st/s",
                 "cold fio/s", "cold % (median)", "RSS own (all)", "budget MB"))
for s in sizes:
    m = one(s, "memory")
    warm = pairs_of(s, "warm")
    warm_st, warm_fio, warm_pct = medians(warm)
    pairs = []
    malloc = []
    mem = "-"
    i = 1
    while one(s, f"cold fio #{i}"):
        st, fi = one(s, f"cold stoke #{i}"), one(s, f"cold fio #{i}")
        mem = fi.get("mem", "malloc")
        if st:
            pairs.append((st["samples_per_s"], fi["samples_per_s"]))
        fm = one(s, f"cold fio-malloc #{i}")
        if fm:
            malloc.append(fm["samples_per_s"])
        i += 1
    cold_st, cold_fio, cold_pct = medians(pairs)
    print(fmt.format(s, m["samples"], m["codecs"], f"{warm_st:,.0f}", f"{warm_fio:,.0f}", f"{warm_pct:.0f} %",
                     f"{cold_st:,.0f}", f"{cold_fio:,.0f}", f"{cold_pct:.0f} %", f"{m['max_anonymous_rss_mb']:.0f} ({m['max_rss_bytes'] / 1e6:.0f})",
                     f"{m['budget_bytes'] / 1e6:.0f}"))
    if warm:
        print(" " * 7 + "warm pairs (stoke/fio): " + ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in warm))
    copies = pairs_of(s, "warm", "memcpy")
    if copies:
        print(" " * 7 + f"warm against the memory-copy limit (stoke/memcpy): " +
              ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in copies) + f"; median {medians(copies)[2]:.0f} %")
    if pairs:
        print(" " * 7 + f"cold pairs (stoke/fio, fio buffers: {mem}): " + ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in pairs))
    if malloc:
        print(" " * 7 + "cold fio with default buffers (malloc): " + ", ".join(f"{m:,.0f}" for m in malloc) +
              (f"; stoke / it, median: {statistics.median(100 * a / m for (a, _), m in zip(pairs, malloc)):.0f} %"
               if len(pairs) == len(malloc) and pairs else ""))
t0, t2, st = one("360k", "warm torch w0"), one("360k", "warm torch w2"), pairs_of("360k", "warm")
if t0 and t2 and st:
    best = max(t0["samples_per_s"], t2["samples_per_s"])
    stoke_sps = statistics.median(p[0] for p in st)
    print(f"seed volumes (360 KB), warm: stoke {stoke_sps:,.0f} samples/s (median); PyTorch DataLoader w0 "
          f"{t0['samples_per_s']:,.0f}, w2 {t2['samples_per_s']:,.0f}: stoke / best DataLoader = "
          f"{stoke_sps / best:.2f}x")
PY
