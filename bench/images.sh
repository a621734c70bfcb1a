#!/usr/bin/env bash
# Images: stoke's loader (decode on its workers with libjpeg-turbo, then the image transforms) against
# torchvision's ImageFolder + DataLoader (PIL decode, the same transforms) on one machine.
#   - data: BENCH_IMAGES generated JPEGs (`stoke synth images`: ImageFolder layout, 10 classes, sides
#     200-500 px, quality 92, about 110 KB each), kept as files and ingested into a stoke table with
#     the defaults (`stoke ingest`: the encoded bytes unchanged, one page per image).
#   - the augmentations on both sides: RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
#     Normalize(ImageNet mean, std); batches of 32 [3, 224, 224] float32, shuffled.
#   - the same images ingested decoded too (`stoke ingest --decode 256`: 256x256 RGB pixels as a uint8
#     tensor, no decoding when loading), for the disk/speed trade-off;
#   - runs, warm page cache (each data set read once right before its runs): `stoke bench load` with
#     --threads 1 and with one thread per core (whole epochs), and once more at 1 thread with
#     --no-jpeg-region (every JPEG decoded whole: what decoding only the crop's region gains); the
#     same on the decoded table (1 thread and one per core); torchvision with num_workers 0 and 2
#     (bench/torchvision_images.py; at most BENCH_TORCH_BATCHES batches each, default 100, after 2
#     warm-up batches). Each row: images/s, busy seconds per stage where known (stoke: fetch, decode,
#     transform, ...; torchvision w0: decode, transform), and peak RSS (/usr/bin/time -v: the largest
#     process; torchvision's workers' peaks are added from /proc).
#   - HDF5: BENCH_H5_SAMPLES volumes (float32 [16, 32, 32], 64 KiB) in files of 100 along axis 0,
#     chunked one sample per chunk with gzip + shuffle (bench/h5py_dataloader.py write), ingested
#     with `stoke ingest --hdf5-samples axis0`; `stoke bench load` (global shuffle, one epoch) against
#     h5py random reads through a map-style Dataset + DataLoader (shuffle=True) at num_workers 0 and
#     2 (at most BENCH_TORCH_BATCHES x 3 batches each).
#   - verdicts: stoke's best images/s over torchvision's best (target: at least 2x), stoke's HDF5
#     samples/s over h5py's best (target: at least 3x), and stoke's peak RSS against its prefetch
#     budget + 150 MB.
#   bench/images.sh [STOKE_BIN]    env: BENCH_IMAGES (default 20000; e.g. 300 for a quick run),
#   BENCH_H5_SAMPLES (default 20000; 0 skips the HDF5 rows), BENCH_DIR (default build/bench-images),
#   BENCH_TORCH_BATCHES (default 100), BENCH_KEEP=1 keeps the images, the HDF5 files and the tables
#   (a later run with the same counts reuses them). Raw JSON lines (one per run, with a "run" key) go
#   to BENCH_DIR/results.jsonl.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
images=${BENCH_IMAGES:-20000}
h5_samples=${BENCH_H5_SAMPLES:-20000}
work=${BENCH_DIR:-build/bench-images}
torch_batches=${BENCH_TORCH_BATCHES:-100}
py=/usr/bin/python3  # Debian's: it has torch, torchvision and PIL
batch=32
size=224
decode_size=256      # the decoded table's pixels: 256x256 RGB, torchvision's usual resize before a 224 crop
prefetch=536870912   # stoke's default --prefetch-bytes

die() { echo "images: $*" >&2; exit 1; }
note() { echo "images: $*" >&2; }

[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
"$stoke" bench load --help 2>&1 | grep -q -- '--transform' ||
  die "'$stoke bench load' has no --transform: build a stoke with the image transforms"
"$py" -c 'import torch, torchvision, PIL, h5py' 2>/dev/null ||
  die "$py lacks torch, torchvision, PIL or h5py (apt-get install python3-torch python3-torchvision python3-pil python3-h5py)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"

src=$work/images
table=$work/table
h5=$work/h5
h5_table=$work/h5_table
results=$work/results.jsonl
mkdir -p "$work"
: >"$results"

# ---- data: N generated JPEGs (seed 0) and their table; reused when present with the right count -----
have=0
if [ -d "$src" ]; then have=$(find "$src" -name '*.jpg' | wc -l); fi
if [ "$have" -ne "$images" ]; then
  note "writing $images JPEGs to $src"
  rm -rf "$src" "$table"
  "$stoke" --no-progress synth images --out "$src" --images "$images" --classes 10 --min-size 200 --max-size 500 \
    --seed 0 >/dev/null
fi
if [ ! -d "$table/_delta_log" ] || [ "$("$stoke" query "$table" --count)" -ne "$images" ]; then
  note "ingesting them into $table"
  rm -rf "$table"
  "$stoke" --no-progress ingest "$src" --table "$table" >/dev/null
fi
decoded=$work/table-decoded
if [ ! -d "$decoded/_delta_log" ] || [ "$("$stoke" query "$decoded" --count)" -ne "$images" ]; then
  note "ingesting them decoded (--decode $decode_size) into $decoded"
  rm -rf "$decoded"
  "$stoke" --no-progress ingest "$src" --table "$decoded" --decode "$decode_size" >/dev/null
fi
warm() { find "$1" -type f -print0 | xargs -0 cat >/dev/null; }

# run LABEL CMD...: runs CMD under /usr/bin/time -v, takes the last JSON object line of its stdout,
# adds "run": LABEL and "time_max_rss_mb" (the largest process's peak RSS), appends it to
# results.jsonl. A failing command stops the benchmark.
run() {
  local label=$1 out
  shift
  note "$label: $*"
  if ! out=$(/usr/bin/time -v -o "$work/time.txt" "$@" 2>"$work/stderr.txt"); then
    cat "$work/stderr.txt" >&2
    die "'$label' failed: $*"
  fi
  printf '%s\n' "$out" | "$py" -c '
import json, re, sys
label, time_txt = sys.argv[1], open(sys.argv[2]).read()
objs = [l.strip() for l in sys.stdin if l.strip().startswith("{")]
if not objs:
    sys.exit("no JSON line in the output")
r = {"run": label, **json.loads(objs[-1])}
m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_txt)
r["time_max_rss_mb"] = int(m.group(1)) / 1024 if m else None
print(json.dumps(r))' "$label" "$work/time.txt" >>"$results" || die "'$label' printed no JSON line: $out"
}

tf=(--transform "random_resized_crop:$size" --transform hflip --transform to_tensor
  --transform "normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225")
load_args=(--batch-size "$batch" --shuffle global --epochs 1 --prefetch-bytes "$prefetch" "${tf[@]}" --json)
load=("$stoke" bench load "$table" "${load_args[@]}")
load_decoded=("$stoke" bench load "$decoded" "${load_args[@]}")
epoch_batches=$(((images + batch - 1) / batch))
tb=$((torch_batches < epoch_batches ? torch_batches : epoch_batches))
warmup=$((tb > 4 ? 2 : 0))

note "warming the page cache with the table"
warm "$table"
run "stoke threads=1" "${load[@]}" --threads 1
run "stoke threads=1 whole" "${load[@]}" --threads 1 --no-jpeg-region
run "stoke threads=$(nproc)" "${load[@]}" --threads 0
note "warming the page cache with the decoded table"
warm "$decoded"
run "stoke decoded threads=1" "${load_decoded[@]}" --threads 1
run "stoke decoded threads=$(nproc)" "${load_decoded[@]}" --threads 0
note "warming the page cache with the JPEG files"
warm "$src"
for w in 0 2; do
  run "torchvision w$w" "$py" bench/torchvision_images.py "$src" --num-workers "$w" --batch-size "$batch" \
    --size "$size" --batches "$tb" --warmup-batches "$warmup" --json
done

# ---- HDF5 ----------------------------------------------------------------------------------------------
if [ "$h5_samples" -gt 0 ]; then
  have=0
  if [ -d "$h5" ]; then have=$(cat "$h5/.samples" 2>/dev/null || echo 0); fi
  if [ "$have" -ne "$h5_samples" ]; then
    note "writing $h5_samples HDF5 samples to $h5"
    rm -rf "$h5" "$h5_table"
    "$py" bench/h5py_dataloader.py write "$h5" --samples "$h5_samples"
    echo "$h5_samples" >"$h5/.samples"
  fi
  if [ ! -d "$h5_table/_delta_log" ] || [ "$("$stoke" query "$h5_table" --count)" -ne "$h5_samples" ]; then
    note "ingesting them into $h5_table"
    rm -rf "$h5_table"
    "$stoke" --no-progress ingest "$h5" --table "$h5_table" --hdf5-samples axis0 >/dev/null
  fi
  warm "$h5_table"
  run "hdf5: stoke" "$stoke" bench load "$h5_table" --batch-size "$batch" --shuffle global --epochs 1 \
    --prefetch-bytes "$prefetch" --json
  h5_epoch=$(((h5_samples + batch - 1) / batch))
  h5b=$((3 * torch_batches < h5_epoch ? 3 * torch_batches : h5_epoch))
  warm "$h5"
  for w in 0 2; do
    run "hdf5: h5py w$w" "$py" bench/h5py_dataloader.py read "$h5" --num-workers "$w" --batch-size "$batch" \
      --batches "$h5b" --warmup-batches "$((h5b > 4 ? 2 : 0))" --json
  done
fi

echo
echo "images: $images generated JPEGs (200-500 px), RandomResizedCrop($size) + RandomHorizontalFlip + ToTensor +" \
  "Normalize, batches of $batch, shuffled, warm page cache; $(nproc) cores," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM"
"$py" - "$results" "$prefetch" "$(du -sb "$table" | cut -f1)" "$(du -sb "$decoded" | cut -f1)" "$decode_size" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
prefetch = int(sys.argv[2])
jpeg_bytes, decoded_bytes, decode_size = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
fmt = "{:<22} {:>9} {:>10} {:>11}  {}"
print(fmt.format("run", "samples/s", "wait share", "peak RSS MB", "busy seconds per stage"))
for r in rows:
    rss = r["time_max_rss_mb"] or 0
    if r.get("workers_max_rss_mb"):
        rss_s = f"{rss:.0f}+{r['workers_max_rss_mb']:.0f}"
    else:
        rss_s = f"{rss:.0f}"
    stages = r.get("stage_seconds") or {}
    stages_s = " ".join(f"{k} {v:.2f}" for k, v in stages.items() if k not in ("wait", "compute")) or "-"
    print(fmt.format(r["run"], f"{r['samples_per_s']:.0f}", f"{r['wait_share']:.3f}", rss_s, stages_s))
images = [r for r in rows if not r["run"].startswith("hdf5:")]
one = {r["run"]: r for r in images}
if "stoke threads=1" in one and "stoke threads=1 whole" in one:
    gain = one["stoke threads=1"]["samples_per_s"] / one["stoke threads=1 whole"]["samples_per_s"]
    print(f"-- decoding only the crop's region (default) / whole JPEGs (--no-jpeg-region), 1 thread: {gain:.2f}x")
best = lambda runs: max(runs, key=lambda r: r["samples_per_s"])
jpeg = best([r for r in images if r["run"].startswith("stoke threads=") and r["run"] != "stoke threads=1 whole"])
dec = [r for r in images if r["run"].startswith("stoke decoded")]
if dec:
    dec = best(dec)
    print(f"-- decoded pixels (ingest --decode {decode_size}): {dec['samples_per_s']:.0f} images/s against "
          f"{jpeg['samples_per_s']:.0f} from the JPEG table ({dec['samples_per_s'] / jpeg['samples_per_s']:.2f}x), "
          f"for {decoded_bytes / 1e6:.0f} MB on disk against {jpeg_bytes / 1e6:.0f} MB "
          f"({decoded_bytes / jpeg_bytes:.2f}x)")
# the verdicts compare the defaults
images = [r for r in images if r["run"] != "stoke threads=1 whole" and not r["run"].startswith("stoke decoded")]
stoke = max((r for r in images if r["tool"] == "stoke"), key=lambda r: r["samples_per_s"])
torch = max((r for r in images if r["tool"].startswith("torchvision")), key=lambda r: r["samples_per_s"])
ratio = stoke["samples_per_s"] / torch["samples_per_s"]
print(f"-- stoke's best ({stoke['run']}) / torchvision's best ({torch['run']}): {ratio:.2f}x "
      f"(target >= 2x: {'met' if ratio >= 2 else 'NOT met'})")
h5 = [r for r in rows if r["run"].startswith("hdf5:")]
if h5:
    hs = next(r for r in h5 if r["tool"] == "stoke")
    hp = max((r for r in h5 if r["tool"].startswith("h5py")), key=lambda r: r["samples_per_s"])
    ratio = hs["samples_per_s"] / hp["samples_per_s"]
    print(f"-- HDF5: stoke / h5py's best ({hp['run']}): {ratio:.2f}x (target >= 3x: {'met' if ratio >= 3 else 'NOT met'})")
peak = max(r["time_max_rss_mb"] or 0 for r in rows if r["tool"] == "stoke")
budget = (prefetch + 150e6) / 2**20
print(f"-- memory: stoke's peak RSS {peak:.0f} MiB; prefetch budget {prefetch / 2**20:.0f} MiB + 150 MB = "
      f"{budget:.0f} MiB: {'within' if peak <= budget else 'OVER'}")
PY
echo "raw results: $results"

if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$src" "$table" "$decoded" "$h5" "$h5_table" "$work/stderr.txt" "$work/time.txt"; fi
