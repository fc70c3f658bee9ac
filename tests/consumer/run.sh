#!/usr/bin/env bash
# run.sh SOURCE_DIR WORK_DIR: installs xsym into WORK_DIR/prefix, then builds and runs the
# find_package consumer against it and the add_subdirectory consumer against the source tree.
set -euo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
cmake -S "$src" -B "$work/xsym-build" -DXSYM_BUILD_TESTS=OFF -DXSYM_BUILD_EXAMPLES=OFF -DXSYM_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --install "$work/xsym-build" >/dev/null
cmake -S "$src/tests/consumer/find_package" -B "$work/fp" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/fp" >/dev/null
"$work/fp/consumer"
cmake -S "$src/tests/consumer/add_subdirectory" -B "$work/as" -DXSYM_SOURCE_DIR="$src" >/dev/null
cmake --build "$work/as" >/dev/null
"$work/as/consumer"
echo "consumer tests passed"
