#!/usr/bin/env bash
# Packs what bench/device_run.sh needs for a machine that has a GPU and a Python with torch but not
# the Debian packages stoke builds with: the `stoke` binary and the Python module (compiled here for
# that machine's Python version), the shared libraries they load (not glibc's, libstdc++ or libgcc),
# and fio with its libraries. One .tar.xz, unpacked by device_run.sh (STOKE_PACK).
#   bench/device_pack.sh OUT.tar.xz [BUILD_DIR]   env: PACK_PYTHON (the interpreter whose headers the
#   module is compiled against; default python3.12 from pyenv if present), PACK_FIO (default 1).
# BUILD_DIR (default build) must hold a built `stoke` and the static libraries (ninja stoke _stoke).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:?usage: bench/device_pack.sh OUT.tar.xz [BUILD_DIR]}")
build=${2:-build}
py=${PACK_PYTHON:-$( (ls -d /root/.pyenv/versions/3.12*/bin/python3 2>/dev/null || true) | tail -1)}
die() { echo "device_pack: $*" >&2; exit 1; }
[ -x "$build/stoke" ] || die "no stoke binary in $build (ninja -C $build stoke _stoke)"
[ -x "$py" ] || die "no interpreter to compile the module for (PACK_PYTHON)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/stoke/bin" "$stage/stoke/lib" "$stage/stoke/python"

# The module for $py: the binding's sources compiled against its headers, linked with BUILD_DIR's
# static libraries as the _stoke target links them (its link line in build.ninja).
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
defs=$(awk '/^build CMakeFiles\/_stoke.dir\/python\/src\/module.cc.o/{f=1} f&&/DEFINES =/{sub(/.*DEFINES = /,""); print; exit}' "$build/build.ninja")
libs=$(awk '/^build python\/stoke\/_stoke/{f=1} f&&/LINK_LIBRARIES =/{sub(/.*LINK_LIBRARIES = /,""); print; exit}' "$build/build.ninja")
objs=() pids=()
for src in python/src/*.cc; do
  o="$stage/$(basename "$src" .cc).o"
  # shellcheck disable=SC2086
  g++ -std=c++20 -O2 -fPIC -fvisibility=hidden $defs -Iinclude -Isrc -isystem "$inc" -isystem /usr/local/cuda/include \
    -isystem /usr/include/hdf5/serial -c "$src" -o "$o" &
  objs+=("$o")
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || die "compiling the Python module failed"; done
mkdir -p "$stage/stoke/python/stoke"
# shellcheck disable=SC2086
(cd "$build" && g++ -shared -o "$stage/stoke/python/stoke/_stoke$suffix" "${objs[@]}" $libs \
  -L/usr/local/cuda/targets/x86_64-linux/lib -Wl,--disable-new-dtags,-rpath,'$ORIGIN/../../lib')
cp -r python/stoke/. "$stage/stoke/python/stoke/"
# For device_run.sh to compile the module there against that machine's pybind11 and numpy instead:
# the static libraries without debug information, and the link line.
mkdir -p "$stage/stoke/static"
printf '%s\n' "$defs" >"$stage/stoke/static/defines"
# The link line with paths inside the pack: static libraries under static/, shared ones under lib/
# by their soname (packed below with the others), flags as they are.
for item in $libs; do
  case "$item" in
    -Wl,*) ;;
    -lcudadevrt | -lcudart_static) echo "static/lib${item#-l}.a" ;;
    -*) echo "$item" ;;
    */librt.a) echo "-lrt" ;;
    *.a) cp "$(cd "$build" && realpath "$item")" "$stage/stoke/static/" 2>/dev/null; echo "static/$(basename "$item")" ;;
    *.so*) soname=$(objdump -p "$item" | awk '/SONAME/ {print $2}'); cp -L "$item" "$stage/stoke/lib/$soname"
           echo "lib/$soname" ;;
  esac
done >"$stage/stoke/static/link"
for a in "$build"/libstoke_*.a; do strip -g -o "$stage/stoke/static/$(basename "$a")" "$a"; done
for a in libcudadevrt.a libcudart_static.a; do
  cp "/usr/local/cuda/targets/x86_64-linux/lib/$a" "$stage/stoke/static/" 2>/dev/null || true
done
rm -rf "$stage/stoke/python/stoke/__pycache__" "$stage"/stoke/python/stoke/*/__pycache__
cp "$build/stoke" "$stage/stoke/bin/stoke"
strip "$stage/stoke/bin/stoke" "$stage/stoke/python/stoke/_stoke$suffix"
# The programs run through wrappers that put the packed libraries on their library path (the module
# finds them through its RPATH instead, so the interpreter's own libraries are left alone).
wrap() {
  mv "$stage/stoke/bin/$1" "$stage/stoke/bin/.$1"
  printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/.%s" "$@"\n' \
    "$1" >"$stage/stoke/bin/$1"
  chmod +x "$stage/stoke/bin/$1"
}

# Shared libraries: those of stoke, the module and fio, except the C and C++ runtimes.
bins=("$stage/stoke/bin/stoke" "$stage/stoke/python/stoke/_stoke$suffix")
if [ "${PACK_FIO:-1}" = 1 ] && command -v fio >/dev/null; then
  cp "$(command -v fio)" "$stage/stoke/bin/fio"
  bins+=("$stage/stoke/bin/fio")
fi
ldd "${bins[@]}" | awk '$3 ~ /^\//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' |
  while read -r lib; do [[ "$lib" == "$stage"/* ]] || cp -L "$lib" "$stage/stoke/lib/"; done
wrap stoke
cp /usr/bin/time "$stage/stoke/bin/time"  # GNU time, for sample_sizes.sh's peak RSS (libc only)
[ -x "$stage/stoke/bin/fio" ] && wrap fio
cat >"$stage/stoke/env.sh" <<'ENV'
# Sourced by bench/device_run.sh: the packed binaries first on PATH, the module on PYTHONPATH.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$here/bin:$PATH" PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export STOKE_BIN="$here/bin/stoke" STOKE_PACK_LIB="$here/lib"
ENV
tar -C "$stage" -cf - stoke | xz -T0 -6 >"$out"
echo "device_pack: $out ($(du -h "$out" | cut -f1)): stoke, the module for $("$py" -V 2>&1), $(ls "$stage/stoke/lib" | wc -l) libraries"
