#!/usr/bin/env bash
# run.sh SOURCE_DIR WORK_DIR SECONDS: builds the config fuzzer with clang's libFuzzer and
# ASan/UBSan and runs it for SECONDS on a copy of the seed corpus.
set -euo pipefail
src=$1 work=$2 seconds=$3
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev (scripts/install-deps.sh does)" >&2
  exit 1
fi
mkdir -p "$work/corpus"
cp "$src/tests/fuzz/corpus/"* "$work/corpus/"
clang++ -std=c++20 -gline-tables-only -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/include" "$src/tests/fuzz/fuzz_config.cpp" -o "$work/fuzz_config"
"$work/fuzz_config" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 "$work/corpus" 2>&1 | tail -15
