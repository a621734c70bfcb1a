# Sourced by the benchmark scripts: the seed data set shared by load_vs_baselines.sh and
# train_volumes.sh (both default to BENCH_DIR=build/bench-load), reused when it is already there.

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
