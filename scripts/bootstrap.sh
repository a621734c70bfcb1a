#!/usr/bin/env bash
# Installs what stoke's build, tests and demo need on Debian 12. Idempotent: quiet when all is present,
# runs `apt-get update` only when a package is missing. npm packages (test-only) go into tests/interop/.
# python3-azure (Microsoft's Azure SDK) is the naive per-blob reader of `stoke.experiments deepiq`;
# chromium and python3-pil let the tests look at the experiments' reports. iproute2, faketime,
# slurm-wlm, munge and python3-distributed make the multi-node test cluster (tests/cluster: network
# namespaces, nodes whose clocks are off, Slurm and Dask on them).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev
  zlib1g-dev libzstd-dev liblz4-dev libsnappy-dev libbrotli-dev libisal-dev libzip-dev liburing-dev
  nlohmann-json3-dev libsimdjson-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-dev python3-numpy python3-pandas python3-pytest python3-torch pybind11-dev
  python3-pip python3-setuptools python3-wheel python3-venv
  python3-azure chromium python3-pil
  coreutils time libmd-dev fio curl
  libcurl4-openssl-dev libssl-dev
  libhdf5-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev python3-h5py python3-pil python3-torchvision
  iproute2 faketime slurm-wlm munge python3-distributed
)
# Node.js and npm run the interop tests; a machine may already carry its own (e.g. from NodeSource),
# whose npm conflicts with Debian's npm package, so they are installed only when absent.
command -v node >/dev/null 2>&1 || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Test-only node packages (DuckDB for interop checks), pinned by tests/interop/package-lock.json.
if [ -f tests/interop/package.json ] && [ ! -d tests/interop/node_modules/@duckdb/node-api ]; then
  echo "bootstrap: installing node test packages"
  if [ -f tests/interop/package-lock.json ]; then
    (cd tests/interop && npm ci --no-audit --no-fund --loglevel=error)
  else
    (cd tests/interop && npm install --no-audit --no-fund --loglevel=error)
  fi
fi

# Test-only object-store servers (Azurite, s3rver) for src/io's tests, pinned by tests/servers/package-lock.json.
if [ -f tests/servers/package.json ] && [ ! -x tests/servers/node_modules/.bin/azurite-blob ]; then
  echo "bootstrap: installing object-store test servers"
  if [ -f tests/servers/package-lock.json ]; then
    (cd tests/servers && npm ci --no-audit --no-fund --loglevel=error)
  else
    (cd tests/servers && npm install --no-audit --no-fund --loglevel=error)
  fi
fi
