# Sourced by bench/device_run.sh (which defines say, work, out, results, py): describes the machine
# into the results, then makes stoke ready and sets STOKE_BIN, PYTHONPATH, NPROC and BENCH_TIME.

describe_machine() {
  NPROC=$(nproc)
  local gpu disk dev model fs
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
  fs=$(df -T "$work" | awk 'NR == 2 {print $1 " " $2}')
  dev=$(basename "$(echo "$fs" | cut -d' ' -f1)")
  # The whole disk of the partition (nvme0n1p1 -> nvme0n1, vda1 -> vda).
  dev=$(lsblk -no PKNAME "/dev/$dev" 2>/dev/null | head -1 | grep . || echo "$dev")
  model=$(cat "/sys/block/$dev/device/model" 2>/dev/null | xargs)
  disk="$fs ${model:-model unknown} rotational=$(cat "/sys/block/$dev/queue/rotational" 2>/dev/null)"
  say "GPU: ${gpu:-none}; $NPROC cores; $(awk '/MemTotal/ {print int($2 / 1048576) " GiB"}' /proc/meminfo) memory"
  say "work directory $work on: $disk"
  lsblk -d -o NAME,MODEL,SIZE,ROTA,TYPE 2>/dev/null | head -8
  printf '{"stage":"setup","gpu":"%s","cores":%d,"memory_kib":%d,"disk":"%s","kernel":"%s","python":"%s"}\n' \
    "$gpu" "$NPROC" "$(awk '/MemTotal/ {print $2}' /proc/meminfo)" "$disk" "$(uname -r)" \
    "$("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')" >>"$results"
}

# The Python module compiled here from the pack's static libraries, against this interpreter's
# headers and pybind11 (so that its numpy support matches the numpy here); false when that fails.
compile_module() {
  local pack=$1 dest=$2 includes suffix defs
  # pip's pybind11 where the interpreter has it, else the system's headers (Debian's pybind11-dev).
  includes=$("$py" -m pybind11 --includes 2>/dev/null) ||
    includes="-isystem $("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  defs=$(cat "$pack/static/defines")
  local objs=() pids=() libs=() lib src o pid
  for src in python/src/*.cc; do
    o="$dest/$(basename "$src" .cc).o"
    # shellcheck disable=SC2086
    g++ -std=c++20 -O2 -fPIC -fvisibility=hidden $defs $includes -Iinclude -Isrc -c "$src" -o "$o" &
    objs+=("$o")
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || return 1; done
  while read -r lib; do
    case "$lib" in
      -*) libs+=("$lib") ;;
      *) libs+=("$pack/$lib") ;;
    esac
  done <"$pack/static/link"
  g++ -shared -o "$dest/stoke/_stoke$suffix" "${objs[@]}" "${libs[@]}" -Wl,--disable-new-dtags,-rpath,"$pack/lib"
}

setup_stoke() {
  if [ -n "${STOKE_PACK:-}" ]; then
    local pack=$work/pack
    rm -rf "$pack" && mkdir -p "$pack" && tar -C "$pack" -xJf "$STOKE_PACK" && pack=$pack/stoke
    source "$pack/env.sh"
    BENCH_TIME=$pack/bin/time
    mkdir -p "$work/module/stoke"
    cp -r python/stoke/. "$work/module/stoke/"
    if compile_module "$pack" "$work/module" 2>"$work/module.log"; then
      export PYTHONPATH=$work/module
      say "Python module compiled here ($(ls "$work"/module/stoke/_stoke*.so | xargs basename))"
    else
      say "compiling the module failed (tail of $work/module.log below); using the packed one"
      tail -5 "$work/module.log"
    fi
  else
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_BUILD_TESTS=OFF \
      -DPython3_EXECUTABLE="$py" >/dev/null && ninja -C build-device stoke _stoke >/dev/null || return 1
    export STOKE_BIN=$PWD/build-device/stoke PYTHONPATH=$PWD/build-device/python
    BENCH_TIME=/usr/bin/time
  fi
  export BENCH_TIME
  "$py" -c 'import stoke, torch; print("stoke", stoke.__file__, "built with CUDA:", stoke.built_with_cuda(),
"| torch", torch.__version__, "CUDA", torch.cuda.is_available())'
}

say "stage setup starts"
describe_machine
setup_stoke || { say "stoke could not be made ready"; exit 1; }
say "stage setup done"
