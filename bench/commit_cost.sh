#!/usr/bin/env bash
# One commit's cost as the log grows: `stoke ingest` of one new .npy file into a table whose log holds
# 10 commits, and into one whose log holds BENCH_COMMITS (default 10,000), alternated, locally and on
# Azurite (directly, no proxy delay). Both tables hold the same state (one data file): the other
# commits are a stream's progress (commitInfo and a txn action each, as an engine appending nothing
# writes them), generated straight into the log, then `stoke checkpoint` writes the checkpoint an
# auto-checkpointing writer would have left. So the difference between the two is the log's length
# alone. Median of BENCH_RUNS (default 7) appends each, wall time of the whole command.
#   bench/commit_cost.sh [STOKE_BIN]   env: BENCH_COMMITS, BENCH_RUNS, BENCH_DIR (default build/bench-commit),
#                                      BENCH_STORAGES (default "local azurite")
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
commits=${BENCH_COMMITS:-10000}
runs=${BENCH_RUNS:-7}
work=${BENCH_DIR:-build/bench-commit}
storages=${BENCH_STORAGES:-local azurite}
py=/usr/bin/python3
[ -x "$stoke" ] || { echo "commit_cost: no stoke binary at '$stoke'" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"

# One source directory per append (a file of its own each, so every ingest commits).
"$stoke" --no-progress synth volumes --samples $((4 * runs + 2)) --shape 2,2,2 --channels 1 --out "$work/volumes" >/dev/null
for i in $(seq 0 $((4 * runs + 1))); do
  mkdir -p "$work/src/$i"
  cp "$work/volumes/$(printf 'volume_%06d.npy' "$i")" "$work/src/$i/"
done

# generate_commits LOG N: commits 1..N-1 (commitInfo + txn) into LOG, a local directory or
# az://container/path (PUT to Azurite with the connection string's shared key).
generate_commits() {
  "$py" - "$1" "$2" <<'PY'
import base64, datetime, hashlib, hmac, json, os, sys, time, urllib.request
log, n = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000) - n

def commit(v):
    lines = [{"commitInfo": {"timestamp": now + v, "operation": "STREAMING UPDATE",
                             "operationParameters": {"outputMode": "Append"}}},
             {"txn": {"appId": "bench-stream", "version": v}}]
    return "".join(json.dumps(l) + "\n" for l in lines).encode()

if not log.startswith("az://"):
    for v in range(1, n):
        with open(os.path.join(log, f"{v:020d}.json"), "wb") as f:
            f.write(commit(v))
    sys.exit(0)

cs = dict(kv.split("=", 1) for kv in os.environ["AZURE_STORAGE_CONNECTION_STRING"].split(";") if "=" in kv)
account, key, endpoint = cs["AccountName"], base64.b64decode(cs["AccountKey"]), cs["BlobEndpoint"].rstrip("/")
path = log[len("az://"):]
base_path = urllib.parse.urlparse(endpoint).path  # /devstoreaccount1 on the emulator

def put(name, body):
    url_path = f"{base_path}/{path}/{name}"
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = {"x-ms-blob-type": "BlockBlob", "x-ms-date": date, "x-ms-version": "2021-08-06"}
    canonical = "".join(f"{k}:{headers[k]}\n" for k in sorted(headers))
    to_sign = "\n".join(["PUT", "", "", str(len(body)), "", "application/octet-stream", "", "", "", "", "", ""])
    to_sign += "\n" + canonical + f"/{account}{url_path}"
    sig = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest()).decode()
    req = urllib.request.Request(endpoint + url_path[len(base_path):], data=body, method="PUT",
                                 headers={**headers, "Content-Type": "application/octet-stream",
                                          "Authorization": f"SharedKey {account}:{sig}"})
    urllib.request.urlopen(req).read()

import urllib.parse
for v in range(1, n):
    put(f"{v:020d}.json", commit(v))
PY
}

# make_table TABLE N: a real ingest (version 0), N-1 generated commits, a checkpoint.
make_table() {
  local table=$1 n=$2
  "$stoke" --no-progress ingest "$work/src/0" --table "$table" >/dev/null
  generate_commits "$table/_delta_log" "$n"
  "$stoke" checkpoint "$table" >/dev/null
}

# Milliseconds of one `stoke ingest` of source directory $2 into table $1.
time_append() {
  local t0 t1
  t0=$(date +%s%N)
  "$stoke" --no-progress ingest "$work/src/$2" --table "$1" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

# measure WHERE SHORT LONG FIRST_SOURCE: alternated appends, then one JSON line.
measure() {
  local where=$1 short=$2 long=$3 k=$4 a=() b=()
  for _ in $(seq 1 "$runs"); do
    a+=("$(time_append "$short" "$k")"); k=$((k + 1))
    b+=("$(time_append "$long" "$k")"); k=$((k + 1))
  done
  local ma mb
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  printf '{"storage": "%s", "commits_short": 10, "commits_long": %d, "append_ms_short": %d, "append_ms_long": %d, "ratio": %s}\n' \
    "$where" "$commits" "$ma" "$mb" "$(awk "BEGIN {printf \"%.2f\", $mb / $ma}")"
}

if [[ " $storages " == *" local "* ]]; then
  echo "commit_cost: local tables of 10 and $commits commits" >&2
  make_table "$work/short" 10
  make_table "$work/long" "$commits"
  measure local "$work/short" "$work/long" 1
fi
[[ " $storages " == *" azurite "* ]] || exit 0

source tests/servers/servers.sh
start_test_server azurite azurite
trap stop_test_servers EXIT
AZURE_STORAGE_CONNECTION_STRING=$(azurite_connection_string "$port")
export AZURE_STORAGE_CONNECTION_STRING
echo "commit_cost: Azurite tables of 10 and $commits commits" >&2
make_table az://bench/short 10
make_table az://bench/long "$commits"
measure azurite az://bench/short az://bench/long $((2 * runs + 1))
