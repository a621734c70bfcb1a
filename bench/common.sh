# Sourced by the benchmark scripts: the sample sizes of sample_sizes.sh and builds_ab.sh, the seed
# data set shared by load_vs_baselines.sh and train_volumes.sh (both default to
# BENCH_DIR=build/bench-load), reused when it is already there, the emulated blob storage of
# blob_storage.sh and optimize_blob.sh, and dropping the page cache for the cold runs.

# can_drop: 1 where this process may drop the page cache (root, /proc/sys/vm/drop_caches writable),
# else 0 (the cold runs are skipped then). drop_caches: writes dirty pages back and drops the page
# cache where it may, else does nothing.
can_drop=0
if [ -w /proc/sys/vm/drop_caches ] && [ "$(id -u)" -eq 0 ]; then can_drop=1; fi
drop_caches() { if [ "$can_drop" = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi; }

# size_spec NAME -> "shape channels samples": float32 samples of the named size (512, 16k, 115k, 360k
# or 4m), and how many make a table of about 0.5-1.6 GB (the page cache here holds about 7 GB).
# Fails for another name.
size_spec() {
  case "$1" in
    512) echo "8,4,4 1 100000" ;;       # 128 floats = 512 B
    16k) echo "16,16,16 1 30000" ;;     # 4,096 floats = 16 KiB
    115k) echo "24,24,10 5 8000" ;;     # 28,800 floats = 115 KB
    360k) echo "30,30,10 10 4000" ;;    # the seed volume: 90,000 floats = 360 KB
    4m) echo "32,32,32 32 400" ;;       # 1,048,576 floats = 4 MiB
    *) return 1 ;;
  esac
}

# batches_for_seconds STOKE TABLE BATCH SECONDS [ARGS...]: how many batches of BATCH samples make
# about SECONDS of `stoke bench load TABLE [ARGS...]` (at least 20), from the rate of a 20-batch probe.
# Python is BENCH_PYTHON (default /usr/bin/python3).
batches_for_seconds() {
  local py=${BENCH_PYTHON:-/usr/bin/python3} sps
  sps=$("$1" bench load "$2" --batch-size "$3" --batches 20 "${@:5}" --json | grep -E '^\{' | tail -1 |
    "$py" -c 'import json, sys; print(json.load(sys.stdin)["samples_per_s"])')
  "$py" -c 'import math, sys
sps, secs, b = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print(max(20, math.ceil(secs * sps / b)))' "$sps" "$4" "$3"
}

# volumes_and_table STOKE VOL TABLE N CODEC: N volumes (seed 0) in VOL, written unless VOL holds
# exactly N .npy files, and their table in TABLE (tensor column `data`, page codec CODEC), ingested
# unless it holds exactly N rows of those volumes. Notes go to stderr.
volumes_and_table() {
  local stoke=$1 vol=$2 table=$3 n=$4 codec=$5 have=0
  if [ -d "$vol" ]; then have=$(find "$vol" -maxdepth 1 -name '*.npy' | wc -l); fi
  if [ "$have" -ne "$n" ]; then
    echo "$(basename "$0" .sh): writing $n volumes to $vol" >&2
    rm -rf "$vol" "$table"
    "$stoke" --no-progress synth volumes --samples "$n" --seed 0 --out "$vol" >/dev/null
  fi
  if [ ! -d "$table/_delta_log" ] || [ "$("$stoke" query "$table" --count)" -ne "$n" ]; then
    echo "$(basename "$0" .sh): ingesting them into $table" >&2
    rm -rf "$table"
    "$stoke" --no-progress ingest "$vol" --labels "$vol/labels.csv" --table "$table" --codec "$codec" >/dev/null
  fi
}

# start_blob_storage_behind_proxy: Azurite and the fault proxy in front of it (tests/servers), stopped
# by stop_test_servers (the caller's EXIT trap). Sets proxy_port, proxy (the proxy's control URL) and
# exports AZURE_STORAGE_CONNECTION_STRING pointing at the proxy.
start_blob_storage_behind_proxy() {
  source tests/servers/servers.sh
  start_test_server azurite azurite
  start_test_server proxy proxy "$port"
  proxy_port=$port
  proxy="http://127.0.0.1:$proxy_port/__fault"
  AZURE_STORAGE_CONNECTION_STRING=$(azurite_connection_string "$proxy_port")
  export AZURE_STORAGE_CONNECTION_STRING
}
