#!/usr/bin/env bash
# The hardware limit for a loader on one table: fio's random reads of BS bytes over the table's data
# files, QD in flight through io_uring, from one thread. With BS = the table's mean page size (one
# sample) fio's IOPS is the most samples per second this disk (DIRECT=1) or the page cache (DIRECT=0)
# can deliver to a loader doing one read per sample at that queue depth.
#   bench/fio_limit.sh TABLE_DIR BS QD DIRECT(0|1) [RUNTIME_S]    (RUNTIME_S default 15)
# Reads every *.parquet under TABLE_DIR (partition directories included; not the Delta log's
# checkpoints, not stoke's _stoke/ cache). DIRECT=0 measures the page cache only if the caller has
# read the files into it first (e.g. `cat FILES >/dev/null`): fio is run with invalidate=0, so it
# neither drops nor warms them. Prints one JSON line:
#   {"tool":"fio","direct":D,"bs":BS,"iodepth":QD,"mem":"shmhuge"|"malloc","mb_per_s":...,"iops":...,
#    "samples_per_s":IOPS}
set -euo pipefail
if [ $# -lt 4 ] || [ $# -gt 5 ]; then
  echo "usage: $0 TABLE_DIR BS QD DIRECT(0|1) [RUNTIME_S]" >&2
  exit 2
fi
table=$1 bs=$2 qd=$3 direct=$4 runtime=${5:-15}
case "$direct" in 0 | 1) ;; *) echo "fio_limit: DIRECT must be 0 or 1, not '$direct'" >&2; exit 2 ;; esac
for v in "$bs" "$qd" "$runtime"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "fio_limit: BS, QD and RUNTIME_S must be positive integers, not '$v'" >&2; exit 2; }
done
command -v fio >/dev/null || { echo "fio_limit: fio is not installed (apt-get install fio)" >&2; exit 1; }

# fio separates file names with ':'; a ':' inside a name is written '\:'.
files=$(find "$table" \( -name _delta_log -o -name _stoke \) -prune -o -type f -name '*.parquet' -print | sort |
  sed 's/:/\\:/g' | paste -sd:)
[ -n "$files" ] || { echo "fio_limit: no .parquet files under $table" >&2; exit 1; }

out=$(mktemp)
# With DIRECT=1, fio's buffers go in huge pages (--mem=shmhuge) where they can be reserved (as root,
# vm.nr_hugepages is raised for the run and put back): a read then reaches the device as one or two
# scatter-gather entries instead of one per 4 KiB page, as stoke's O_DIRECT reads do
# (src/core/huge_pages.h). On a virtio disk without indirect descriptors that decides how many reads
# are in flight at the device (3-8 of 64 with ordinary pages, all 64 with huge ones), so fio with its
# default buffers would not be the disk's limit. Elsewhere fio keeps its default buffers; the JSON's
# "mem" says which.
# FIO_MEM=malloc keeps fio's default buffers (for a comparison in one run).
mem=malloc
hugepages_file=/proc/sys/vm/nr_hugepages
old_hugepages=
restore() {
  if [ -n "$old_hugepages" ]; then echo "$old_hugepages" >"$hugepages_file" 2>/dev/null || true; fi
  rm -f "$out"
}
trap restore EXIT
if [ "$direct" = 1 ] && [ "${FIO_MEM:-}" != malloc ] && [ -w "$hugepages_file" ]; then
  need=$(( (qd * bs + 2097151) / 2097152 + 2 ))
  old_hugepages=$(cat "$hugepages_file")
  echo $(( old_hugepages + need )) >"$hugepages_file" 2>/dev/null || true
  free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
  if [ "${free_pages:-0}" -ge "$need" ]; then mem=shmhuge; fi
fi
fio --name=randread --rw=randread --ioengine=io_uring --iodepth="$qd" --bs="$bs" --direct="$direct" \
  --numjobs=1 --time_based --runtime="$runtime" --norandommap --randrepeat=0 --invalidate=0 --mem="$mem" \
  --filename="$files" --output-format=json --output="$out" >/dev/null

"${BENCH_PYTHON:-/usr/bin/python3}" - "$out" "$direct" "$bs" "$qd" "$mem" <<'PY'
import json, sys
path, direct, bs, qd, mem = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with open(path) as f:
    text = f.read()
# fio may put notes before the JSON document.
doc = json.loads(text[text.index("{"):])
job = doc["jobs"][0]
if job.get("error"):
    sys.exit(f"fio_limit: fio reports error {job['error']}")
read = job["read"]
iops = read["iops"]
print(json.dumps({"tool": "fio", "direct": direct, "bs": bs, "iodepth": qd, "mem": mem,
                  "mb_per_s": round(read["bw_bytes"] / 1e6, 1), "iops": round(iops, 1),
                  "samples_per_s": round(iops, 1)}, separators=(",", ":")))
PY
