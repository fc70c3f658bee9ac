#!/usr/bin/env bash
# run_graphs.sh SOURCE_DIR WORK_DIR SECONDS LIBS...: builds the graph fuzzer (fuzz_graphs.cpp)
# with clang's libFuzzer and ASan/UBSan, linking LIBS (BLAS), and runs it for SECONDS on the
# corpus it keeps in WORK_DIR. The build is the whole library compiled by clang for the baseline
# CPU (no -march=native), so it is kept and redone only when a header it reads is newer.
set -euo pipefail
src=$1 work=$2 seconds=${XSYM_FUZZ_SECONDS:-$3}  # make test-long runs it longer
shift 3
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev (scripts/install-deps.sh does)" >&2
  exit 1
fi
mkdir -p "$work/corpus"
bin=$work/fuzz_graphs
if [[ ! -x $bin || -n $(find "$src/include" "$src/tests/compile/random_graph.hpp" "$src/tests/fuzz/fuzz_graphs.cpp" \
                         "$src/tests/fuzz/run_graphs.sh" -newer "$bin" -print -quit) ]]; then
  clang++ -std=c++20 -gline-tables-only -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$src/include" -I"$src/tests" "$src/tests/fuzz/fuzz_graphs.cpp" \
    -o "$bin.new" "$@" -pthread
  mv "$bin.new" "$bin"
fi
# Inputs of up to 256 bytes: a graph reads fewer, and zeros once they run out.
status=0
"$bin" -max_total_time="$seconds" -timeout=30 -max_len=256 -print_final_stats=1 -artifact_prefix="$work/" \
  "$work/corpus" >"$work/fuzz_graphs.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
  # The dump and the differences come first, then libFuzzer's report and the input it saved
  # (XSYM_GRAPH_PRINT=1 fuzz_graphs <input> prints the graph of an input that crashed).
  grep -A40 "^fuzz_graphs:" "$work/fuzz_graphs.log" || true
  tail -40 "$work/fuzz_graphs.log"
  exit "$status"
fi
tail -8 "$work/fuzz_graphs.log"
