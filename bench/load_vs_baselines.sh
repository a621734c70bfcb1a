#!/usr/bin/env bash
# stoke's loader against the ways people load the same samples today, and against the hardware, in
# one run on one machine. N seed volumes (30x30x10x10 float32, 360 KB each) are kept both as .npy
# files and as a stoke table; every run makes batches of 32 in a shuffled order.
#   - warm page cache (the run's files read once right before it): `stoke bench load`; PyTorch's
#     DataLoader over the .npy files with 0 and 2 workers (bench/torch_dataloader.py; limited with
#     --batches to about 25 s each, or one epoch if that is shorter); `stoke bench files` (open, read,
#     close, parse per file, one thread); fio's random reads of one mean page per read at queue depth
#     64 (bench/fio_limit.sh, DIRECT=0): what the page cache can deliver.
#   - cold (page cache dropped before each run; root only, otherwise these rows are skipped):
#     `stoke bench load --cold` and fio DIRECT=1 (the disk's limit) in alternation, BENCH_COLD_REPS
#     (default 3) times each, every stoke run compared with the fio run after it (the disk's speed
#     drifts between minutes); then `stoke bench files --cold`.
#   - utilisation: each batch "computes" (sleeps) X ms, X chosen so that the compute needs 80% of
#     the cold fio bandwidth: X = 32 * page_bytes_mean / (0.8 * fio cold bytes/s) * 1000. stoke
#     (cold), the faster DataLoader (warm page cache: it cannot come close cold anyway) and
#     `stoke bench files --cold`; utilisation = compute / wall.
#   - memory: the peak RSS of a cold `stoke bench load` against its prefetch budget + 150 MB.
# Not root: the cold stoke rows are skipped; fio DIRECT=1 still runs (O_DIRECT needs no dropped
# cache), and the utilisation and memory runs read with O_DIRECT without dropping the cache first.
# Ratios: baseline rows show stoke's samples/s (utilisation rows: utilisation) over the row's; stoke
# rows show their samples/s as a share of fio's in the same cache state.
#   bench/load_vs_baselines.sh [STOKE_BIN]    env: BENCH_SAMPLES (default 20000), BENCH_DIR (default
#   build/bench-load), BENCH_CODEC (the table's page codec, default auto), BENCH_KEEP=1 keeps the volumes and the table (a later run with the same
#   BENCH_SAMPLES reuses them). Raw JSON lines (one per run, with a "run" key) go to BENCH_DIR/results.jsonl.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-20000}
work=${BENCH_DIR:-build/bench-load}
py=/usr/bin/python3  # Debian's: it has numpy and torch
batch=32
qd=64                # stoke's default queue depth
prefetch=536870912   # stoke's default --prefetch-bytes
torch_seconds=25     # target length of each DataLoader run
cold_reps=${BENCH_COLD_REPS:-3}   # alternating cold stoke / fio pairs
fio_cold_seconds=8   # each cold fio run
# The table's page codec: stoke's default (auto: per column chunk, zstd only where it saves >= 10 %;
# tensor columns only where it saves >= 90 % of pages averaging >= 64 KiB).
codec=${BENCH_CODEC:-auto}

die() { echo "load_vs_baselines: $*" >&2; exit 1; }
note() { echo "load_vs_baselines: $*" >&2; }

[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
# `stoke bench load --help` would print the group's help and succeed even without `load`: ask the
# group which subcommands it has.
bench_help=$("$stoke" bench --help 2>&1 || true)
grep -qE '^ +load( |$)' <<<"$bench_help" ||
  die "'$stoke bench load' is missing: build a stoke that has the loader benchmark (src/bench/load_bench.*)"
grep -qE '^ +files( |$)' <<<"$bench_help" || die "'$stoke bench files' is missing"
command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
"$py" -c 'import numpy, torch' 2>/dev/null || die "$py lacks numpy or torch (apt-get install python3-torch)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"

vol=$work/volumes
table=$work/table
results=$work/results.jsonl
mkdir -p "$work"
: >"$results"

# ---- data: N volumes (seed 0) and their table; reused when present with the right count --------
volumes_and_table "$stoke" "$vol" "$table" "$samples" "$codec"

# ---- helpers ------------------------------------------------------------------------------------
warm_npy() { find "$vol" -maxdepth 1 -name '*.npy' -print0 | xargs -0 cat >/dev/null; }
warm_table() { find "$table" -name '*.parquet' -print0 | xargs -0 cat >/dev/null; }

# jget JSON KEY: one value of a JSON object.
jget() { "$py" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# run LABEL CMD...: runs CMD, takes the last line of its stdout that is a JSON object, appends it to
# results.jsonl with "run": LABEL in front, and prints it. A failing command stops the benchmark.
run() {
  local label=$1 out line
  shift
  note "$label: $*"
  if ! out=$("$@" 2>"$work/stderr.txt"); then
    cat "$work/stderr.txt" >&2
    die "'$label' failed: $*"
  fi
  line=$(printf '%s\n' "$out" | "$py" -c '
import json, sys
objs = [l.strip() for l in sys.stdin if l.strip().startswith("{")]
if not objs:
    sys.exit("no JSON line in the output")
json.loads(objs[-1])
print(objs[-1])') || die "'$label' printed no JSON line: $out"
  printf '{"run":"%s",%s\n' "$label" "${line#\{}" >>"$results"
  printf '%s\n' "$line"
}

# torch_batches WORKERS: how many batches make a DataLoader run of about $torch_seconds (at least
# 10, at most one epoch), from a short probe.
torch_batches() {
  local probe sps
  probe=$("$py" bench/torch_dataloader.py "$vol" --num-workers "$1" --batch-size "$batch" --batches 10 \
    --warmup-batches 2 --json)
  sps=$(jget "$probe" samples_per_s)
  "$py" -c 'import math, sys
sps, secs, b, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(max(10, min(math.ceil(n / b), math.ceil(secs * sps / b))))' "$sps" "$torch_seconds" "$batch" "$samples"
}

load=("$stoke" bench load "$table" --batch-size "$batch" --shuffle global --epochs 1 --json)

# ---- warm page cache -------------------------------------------------------------------------------
# This machine's page cache holds about 7 GB (a memory cgroup limit), less than both copies of
# 20,000 volumes (2 x 7.2 GB): each data set is read once right before the runs that use it, so
# every run starts as warm as the machine allows.
note "warming the page cache with the table"
warm_table
stoke_warm=$(run "warm: stoke load" "${load[@]}")
page_bytes=$(jget "$stoke_warm" page_bytes_mean)
bs=$("$py" -c 'import math, sys; print(math.ceil(float(sys.argv[1]) / 4096) * 4096)' "$page_bytes")
torch_best_workers=0 torch_best_sps=0 torch_best_batches=0
note "warming the page cache with the .npy files"
warm_npy
for w in 0 2; do
  n=$(torch_batches "$w")
  r=$(run "warm: torch DataLoader w$w" "$py" bench/torch_dataloader.py "$vol" --num-workers "$w" \
    --batch-size "$batch" --batches "$n" --warmup-batches 2 --json)
  sps=$(jget "$r" samples_per_s)
  if "$py" -c 'import sys; sys.exit(not float(sys.argv[1]) > float(sys.argv[2]))' "$sps" "$torch_best_sps"; then
    torch_best_workers=$w torch_best_sps=$sps torch_best_batches=$n
  fi
done
warm_npy
run "warm: stoke bench files" "$stoke" bench files "$vol" --batch-size "$batch" --json >/dev/null
warm_table
run "warm: fio (page cache)" bash bench/fio_limit.sh "$table" "$bs" "$qd" 0 >/dev/null

# ---- cold ------------------------------------------------------------------------------------------
# This machine's disk bandwidth moves a lot from minute to minute, so stoke and fio run in
# alternation, $cold_reps times each, and each stoke run is compared with the fio run right after it.
fio_cold=""
for i in $(seq 1 "$cold_reps"); do
  if [ "$can_drop" = 1 ]; then
    drop_caches
    run "cold: stoke load --cold #$i" "${load[@]}" --cold >/dev/null
  fi
  drop_caches
  # O_DIRECT bypasses the page cache, so the disk's limit needs no root; its compute-ms needs it.
  r=$(run "cold: fio (disk, O_DIRECT) #$i" bash bench/fio_limit.sh "$table" "$bs" "$qd" 1 "$fio_cold_seconds")
  fio_cold="$fio_cold$r"$'\n'
done
# The median fio run sets the emulated compute below.
fio_cold=$(printf '%s' "$fio_cold" | "$py" -c '
import json, sys
runs = sorted((json.loads(l) for l in sys.stdin if l.strip()), key=lambda r: r["mb_per_s"])
print(json.dumps(runs[len(runs) // 2]))')
if [ "$can_drop" = 1 ]; then
  drop_caches
  run "cold: stoke bench files --cold" "$stoke" bench files "$vol" --batch-size "$batch" --cold --json >/dev/null
else
  note "not root: cannot drop the page cache, so the cold stoke rows are skipped"
fi

# ---- utilisation -----------------------------------------------------------------------------------
compute_ms=$("$py" -c 'import sys; print(round(32 * float(sys.argv[1]) / (0.8 * float(sys.argv[2]) * 1e6) * 1000, 3))' \
  "$page_bytes" "$(jget "$fio_cold" mb_per_s)")
note "compute per batch: $compute_ms ms (needs 80% of the cold fio bandwidth)"
drop_caches
run "util: stoke load --cold" "${load[@]}" --cold --compute-ms "$compute_ms" >/dev/null
note "re-warming the .npy files for the DataLoader"
warm_npy
run "util: torch DataLoader w$torch_best_workers (warm)" "$py" bench/torch_dataloader.py "$vol" \
  --num-workers "$torch_best_workers" --batch-size "$batch" --batches "$torch_best_batches" --warmup-batches 2 \
  --compute-ms "$compute_ms" --json >/dev/null
drop_caches
run "util: stoke bench files --cold" "$stoke" bench files "$vol" --batch-size "$batch" --cold \
  --compute-ms "$compute_ms" --json >/dev/null

# ---- memory ----------------------------------------------------------------------------------------
drop_caches
run "memory: stoke load --cold" /usr/bin/time -v -o "$work/time.txt" "${load[@]}" --cold --prefetch-bytes "$prefetch" \
  >/dev/null
rss_kb=$(awk -F': *' '/Maximum resident set size/ {print $2}' "$work/time.txt")
[ -n "$rss_kb" ] || die "no 'Maximum resident set size' in $work/time.txt"
printf '{"run":"memory","max_rss_bytes":%d,"prefetch_bytes":%d,"budget_bytes":%d}\n' \
  "$((rss_kb * 1024))" "$prefetch" "$((prefetch + 150000000))" >>"$results"

# ---- the table -------------------------------------------------------------------------------------
table_bytes=$(find "$table" -name '*.parquet' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
echo
echo "stoke bench load vs baselines: $samples volumes, batches of $batch, shuffled; table $((table_bytes / 1000000)) MB," \
  "mean page $page_bytes B (fio bs $bs, iodepth $qd); $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM"
"$py" - "$results" "$compute_ms" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
compute_ms = sys.argv[2]
sections = [("warm", "warm page cache"), ("cold", "cold (page cache dropped, O_DIRECT)"),
            ("util", f"utilisation: {compute_ms} ms of compute per batch (80% of cold fio bandwidth)")]
fmt = "{:<44} {:>11} {:>9} {:>11} {:>12} {:>16}"
print(fmt.format("run", "samples/s", "MB/s", "wait share", "utilisation", "ratio"))
for key, title in sections:
    sec = [r for r in rows if r["run"].startswith(key + ":")]
    if not sec:
        continue
    print(f"-- {title}")
    stoke = next((r for r in sec if r.get("tool") == "stoke"), None)
    fio = next((r for r in sec if r.get("tool") == "fio"), None)
    def rep(r):  # the repetition suffix of a label, "#2", or ""
        return r["run"].rsplit(" ", 1)[1] if r["run"].rsplit(" ", 1)[-1].startswith("#") else ""
    paired = []
    for r in sec:
        if r["tool"] == "fio":
            ratio = "limit"
        elif r["tool"] == "stoke":
            # Against the fio run of the same repetition (cold runs alternate), else the section's fio.
            f = next((x for x in sec if x.get("tool") == "fio" and rep(x) == rep(r)), fio)
            ratio = f"{r['samples_per_s'] / f['samples_per_s']:.0%} of fio" if f else ""
            if f and rep(r):
                paired.append(r["samples_per_s"] / f["samples_per_s"])
        elif stoke and key == "util":
            ratio = f"stoke {stoke['utilisation'] / r['utilisation']:.2f}x" if r["utilisation"] > 0 else ""
        elif stoke:
            ratio = f"stoke {stoke['samples_per_s'] / r['samples_per_s']:.1f}x"
        else:
            ratio = ""
        wait = f"{r['wait_share']:.3f}" if "wait_share" in r else ""
        util = f"{r['utilisation']:.3f}" if "utilisation" in r else ""
        print(fmt.format(r["run"].split(": ", 1)[1], f"{r['samples_per_s']:.0f}", f"{r['mb_per_s']:.0f}", wait, util,
                         ratio))
    if paired:
        paired.sort()
        print(f"   stoke / fio, median of {len(paired)} alternating pairs: {paired[len(paired) // 2]:.0%}")
mem = next(r for r in rows if r["run"] == "memory")
verdict = "within" if mem["max_rss_bytes"] <= mem["budget_bytes"] else "OVER"
print(f"-- memory: stoke load --cold peak RSS {mem['max_rss_bytes'] / 1e6:.0f} MB; prefetch budget "
      f"{mem['prefetch_bytes'] / 1e6:.0f} MB + 150 MB = {mem['budget_bytes'] / 1e6:.0f} MB: {verdict}")
PY
echo "raw results: $results"

if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$vol" "$table" "$work/stderr.txt" "$work/time.txt"; fi
