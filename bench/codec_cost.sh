#!/usr/bin/env bash
# What compression costs the loader: the same samples ingested with --codec zstd and with --codec
# uncompressed, loaded warm (page cache) and cold (O_DIRECT) side by side, and what --codec auto
# chose for them. The data compress by different amounts:
#   tokens4k    20,000 x int32[1024] (4 KiB) Zipf token ids, zstd saves about 60 %
#   tokens64k    4,000 x int32[16384] (64 KiB), the same, about 60 %
#   tokens360k   1,500 x int32[90000] (360 KB), the same, about 60 %
#   mask360k     1,500 x float32[90000] (360 KB), 8 % non-zero, about 90 %
#   sparse360k   1,500 x float32[90000] (360 KB), 1 % non-zero, about 98 %
# Each load: `stoke bench load` with the defaults (batches of 32, global shuffle), warm over 3 epochs
# after the files were read once, cold over one epoch after the page cache was dropped (root only;
# otherwise the cold rows are skipped). BENCH_REPS (default 2) alternated repetitions; the table
# gives the median of zstd / uncompressed per repetition.
#   bench/codec_cost.sh [STOKE_BIN]   env: BENCH_DIR (default build/bench-codec), BENCH_REPS,
#   BENCH_SCALE (divides the sample counts), BENCH_PYTHON (default /usr/bin/python3, with numpy).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
work=${BENCH_DIR:-build/bench-codec}
reps=${BENCH_REPS:-2}
scale=${BENCH_SCALE:-1}
py=${BENCH_PYTHON:-/usr/bin/python3}
die() { echo "codec_cost: $*" >&2; exit 1; }
note() { echo "codec_cost: $*" >&2; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
"$py" -c 'import numpy' 2>/dev/null || die "$py lacks numpy"
mkdir -p "$work"
results=$work/results.jsonl
: >"$results"
source bench/common.sh  # can_drop, drop_caches

# The sources: NAME KIND COUNT ELEMENTS (.npy files, seeded).
specs=("tokens4k tokens 20000 1024" "tokens64k tokens 4000 16384" "tokens360k tokens 1500 90000"
  "mask360k mask:0.08 1500 90000" "sparse360k mask:0.01 1500 90000")
for spec in "${specs[@]}"; do
  read -r name kind n k <<<"$spec"
  n=$((n / scale))
  [ -d "$work/$name/_delta_log" ] && [ "$(cat "$work/$name/spec" 2>/dev/null)" = "$spec $n" ] && continue
  note "$name: writing $n samples"
  rm -rf "${work:?}/$name"
  "$py" - "$work/$name/src" "$kind" "$n" "$k" <<'PY'
import os, sys
import numpy as np
out, kind, n, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out)
rng = np.random.default_rng(0)
for i in range(n):
    if kind == "tokens":
        a = np.minimum(rng.zipf(1.2, size=k), 50000).astype(np.int32)
    else:
        a = np.zeros(k, np.float32)
        hit = rng.random(k) < float(kind.split(":")[1])
        a[hit] = rng.random(int(hit.sum())).astype(np.float32)
    np.save(f"{out}/s_{i:06d}.npy", a)
PY
  for codec in zstd uncompressed auto; do
    "$stoke" --no-progress ingest "$work/$name/src" --table "$work/$name/$codec" --codec "$codec" >/dev/null
  done
  rm -rf "${work:?}/$name/src"
  echo "$spec $n" >"$work/$name/spec"
done

load() {  # TABLE MODE(warm|cold) -> samples/s
  local args=(bench load "$1" --json)
  if [ "$2" = warm ]; then
    find "$1" -name '*.parquet' -print0 | xargs -0 cat >/dev/null
    args+=(--epochs 3)
  else
    drop_caches
    args+=(--epochs 1 --cold)
  fi
  "$stoke" "${args[@]}" | grep -E '^\{' | tail -1 |
    "$py" -c 'import json, sys; print(json.load(sys.stdin)["samples_per_s"])'
}

for rep in $(seq 1 "$reps"); do
  for spec in "${specs[@]}"; do
    read -r name _ <<<"$spec"
    modes=(warm)
    if [ "$can_drop" = 1 ]; then modes+=(cold); fi
    for mode in "${modes[@]}"; do
      note "$name $mode #$rep"
      z=$(load "$work/$name/zstd" "$mode")
      u=$(load "$work/$name/uncompressed" "$mode")
      printf '{"data":"%s","mode":"%s","rep":%d,"zstd":%s,"uncompressed":%s}\n' "$name" "$mode" "$rep" "$z" "$u" >>"$results"
    done
  done
done

echo
echo "compression and the loader: samples/s with --codec zstd against uncompressed, stoke's defaults, $(nproc) cores"
"$py" - "$results" "$work" "$stoke" "${specs[@]}" <<'PY'
import json, statistics, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
work, stoke, specs = sys.argv[2], sys.argv[3], sys.argv[4:]
def size(table):
    return sum(int(l.split()[0]) for l in subprocess.run(["du", "-sb", table], capture_output=True, text=True).stdout.splitlines())
def auto_choice(table):
    j = json.loads(subprocess.run([stoke, "inspect", table, "--json"], capture_output=True, text=True).stdout)
    return ",".join(sorted(j["column_codecs"].get("data", {}).get("chunks", {})))
fmt = "{:<11} {:>9} {:>13} {:>13} {:>11} {:>13} {:>11} {:>13}"
print(fmt.format("data", "saved", "warm zstd/s", "warm plain/s", "warm ratio", "cold zstd/s", "cold ratio", "auto chose"))
for spec in specs:
    name = spec.split()[0]
    saved = 1 - size(f"{work}/{name}/zstd") / size(f"{work}/{name}/uncompressed")
    cells = []
    for mode in ("warm", "cold"):
        rs = [r for r in rows if r["data"] == name and r["mode"] == mode]
        if not rs:
            cells += ["-", "-", "-"] if mode == "warm" else ["-", "-"]
            continue
        z = statistics.median(r["zstd"] for r in rs)
        u = statistics.median(r["uncompressed"] for r in rs)
        ratio = statistics.median(r["zstd"] / r["uncompressed"] for r in rs)
        cells += [f"{z:,.0f}", f"{u:,.0f}", f"{ratio:.2f}x"] if mode == "warm" else [f"{z:,.0f}", f"{ratio:.2f}x"]
    print(fmt.format(name, f"{100 * saved:.0f} %", *cells, auto_choice(f"{work}/{name}/auto")))
print("(ratio: zstd / uncompressed samples/s, the median over repetitions; saved: of the table's bytes)")
PY
