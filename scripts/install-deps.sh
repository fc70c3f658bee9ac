#!/usr/bin/env bash
# Installs xsym's Debian build dependencies when any is missing. With --mpi, Open MPI too
# (for <xsym/mpi.hpp>, its tests and example: `make mpi`); nothing else needs it.
set -euo pipefail

packages=(g++ cmake make ninja-build python3 libxtensor-dev libxsimd-dev xtl-dev catch2 libopenblas-dev nlohmann-json3-dev
          clang libclang-rt-dev libbenchmark-dev)
# `make bench` also needs Eigen (the hand-written baseline).
[ "${XSYM_DEPS_BENCH:-0}" = 1 ] && packages+=(libeigen3-dev)
[ "${1:-}" = --mpi ] && packages+=(libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "xsym: installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get update -q && sudo apt-get install -y -q "${missing[@]}"
    exit 0
  fi
  echo "xsym: cannot install as a non-root user. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
