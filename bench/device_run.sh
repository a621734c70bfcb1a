#!/usr/bin/env bash
# Everything stoke measures on a machine with an NVIDIA GPU, in one run of about 8 minutes, each
# stage timed and bounded so that a run cut off still shows where it got:
#   setup     the machine (GPU, cores, memory, the disk under the work directory and its model), and
#             stoke: from STOKE_PACK (bench/device_pack.sh's archive: the binary, the libraries, and
#             the static libraries from which the Python module is compiled here against this
#             machine's Python, pybind11 and numpy; the packed module where that fails), else built
#             here with cmake (a machine with stoke's build dependencies);
#   tests     python/tests/test_gpu_images.py and test_cuda.py on the device;
#   data      20,000 generated JPEGs of 200-500 px (an ImageFolder) and their table; 4,000 seed
#             volumes (360 KB) and their table; stoke's default options;
#   h2d       bench/h2d.py: stoke's pinned batches to the GPU against a pinned cudaMemcpy;
#   und       bench/und.py: ResNet-50, AMP (bfloat16), batch 128, RandomResizedCrop(224) + flip +
#             normalize, fed by torchvision's DataLoader (PIL), stoke (CPU transforms) and stoke
#             (transforms_on="cuda"), with all cores and with 4 and 8 (images/s and GPU busy share);
#   sizes     bench/sample_sizes.sh, warm and cold against fio, on this machine's disk;
#   deepiq    python3 -m stoke.experiments deepiq --device cuda --scale small --storage local (no
#             emulated blob store there), if time is left (DEVICE_DEEPIQ_SCALE=default: its
#             documented scale, 40 steps an epoch).
#   bench/device_run.sh OUT_DIR    env: STOKE_PACK (archive; a relative path is taken from the
#   repository's root), DEVICE_WORK (default .bench-device in
#   the repository: on the machine's disk, not a tmpfs), DEVICE_BUDGET_S (default 480: later stages
#   are skipped when less time is left than they need), DEVICE_STAGES (default all: a subset of
#   "setup tests data h2d und sizes deepiq"; setup always runs), DEVICE_PYTHON (default python3: the
#   one with torch), DEVICE_IMAGES and DEVICE_VOLUMES (default 20000 and 4000; fewer for a trial).
# Results: OUT_DIR/results.jsonl (one JSON object per measurement, with a "stage" key),
# OUT_DIR/summary.txt (the stages' tables), OUT_DIR/log.txt (everything printed).
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?usage: bench/device_run.sh OUT_DIR}")
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
work=$(realpath -m "${DEVICE_WORK:-.bench-device}")
budget=${DEVICE_BUDGET_S:-480}
stages=${DEVICE_STAGES:-"setup tests data h2d und sizes deepiq"}
start=$(date +%s)
py=${DEVICE_PYTHON:-$(command -v python3)}
results=$out/results.jsonl
summary=$out/summary.txt
mkdir -p "$work"

elapsed() { echo $(($(date +%s) - start)); }
say() { echo "[device_run +$(elapsed)s] $*"; }
left() { echo $((budget - $(elapsed))); }
wanted() { [[ " $stages " == *" $1 "* ]]; }
# stage NAME NEEDS_S: true when NAME is wanted and at least NEEDS_S seconds of the budget are left.
stage() {
  wanted "$1" || return 1
  if [ "$(left)" -lt "$2" ]; then
    say "stage $1 skipped: $(left) s left, it needs $2 s"
    echo "{\"stage\":\"$1\",\"skipped\":\"$(left) s left of the budget\"}" >>"$results"
    return 1
  fi
  say "stage $1 starts"
  return 0
}
# tag STAGE: prefixes each JSON line of stdin with "stage":STAGE and appends it to the results.
tag() { grep -E '^\{' | sed "s/^{/{\"stage\":\"$1\",/" >>"$results"; }

source bench/device_setup.sh

if stage tests 60; then
  STOKE_BIN=$STOKE_BIN STOKE_PYTHONPATH=$PYTHONPATH timeout 120 "$py" -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_images.py python/tests/test_cuda.py -rs 2>&1 | tail -25
  echo "{\"stage\":\"tests\",\"rc\":${PIPESTATUS[0]}}" >>"$results"
  say "stage tests done"
fi

images=$work/images table=$work/images-table vol=$work/volumes vtable=$work/volumes-table
if stage data 40; then
  [ -d "$images" ] || "$STOKE_BIN" --no-progress synth images --out "$images" --images "${DEVICE_IMAGES:-20000}" --min-size 200 \
    --max-size 500 --seed 1 >/dev/null
  [ -d "$table/_delta_log" ] || "$STOKE_BIN" --no-progress ingest "$images" --table "$table" | tail -1
  [ -d "$vol" ] || "$STOKE_BIN" --no-progress synth volumes --samples "${DEVICE_VOLUMES:-4000}" --out "$vol" >/dev/null
  [ -d "$vtable/_delta_log" ] || "$STOKE_BIN" --no-progress ingest "$vol" --table "$vtable" | tail -1
  du -sh "$images" "$table" "$vol" "$vtable"
  say "stage data done"
fi

if stage h2d 30; then
  timeout 90 "$py" bench/h2d.py --volumes-table "$vtable" --images-table "$table" --batches 100 --warmup 10 \
    --json "$work/h2d.jsonl" | tee -a "$summary"
  [ -f "$work/h2d.jsonl" ] && tag h2d <"$work/h2d.jsonl"
  say "stage h2d done"
fi

# und CORES WORKERS: one bench/und.py process restricted to CORES cores (0: all).
und() {
  local cores=$1 workers=$2 limit
  limit=$(($(left) - 60))
  [ "$limit" -gt 20 ] || { say "und cores=$cores skipped: too little time left"; return; }
  timeout "$limit" "$py" bench/und.py --images "$images" --table "$table" --model resnet50 --batch-size 128 \
    --steps 40 --warmup-steps 8 --workers "$workers" --amp bfloat16 --device cuda --time-limit 25 \
    $([ "$cores" -gt 0 ] && echo --cores "$cores") --json "$work/und.jsonl" 2>&1 | grep -v '^{' | tee -a "$summary"
}
if stage und 90; then
  : >"$work/und.jsonl"
  und 0 "$((NPROC / 2)),$NPROC"
  und 8 8
  und 4 4
  tag und <"$work/und.jsonl"
  say "stage und done"
fi

if stage sizes 120; then
  BENCH_DIR=$work/sizes BENCH_SIZES=${DEVICE_SIZES:-"16k 360k 4m"} BENCH_WARM_REPS=1 BENCH_COLD_REPS=1 \
    BENCH_SECONDS=4 BENCH_PYTHON=$py BENCH_TIME=${BENCH_TIME:-/usr/bin/time} \
    timeout $(($(left) - 20)) bash bench/sample_sizes.sh "$STOKE_BIN" 2>&1 | tee -a "$summary"
  [ -f "$work/sizes/results.jsonl" ] && tag sizes <"$work/sizes/results.jsonl"
  say "stage sizes done"
fi

if stage deepiq 60; then
  (cd "$work" && timeout $(($(left) - 5)) "$py" -m stoke.experiments deepiq --device cuda --scale "${DEVICE_DEEPIQ_SCALE:-small}" --storage local \
    --out "$work/deepiq" 2>&1 | tail -25 | tee -a "$summary")
  say "stage deepiq done"
fi
say "done in $(elapsed) s"
