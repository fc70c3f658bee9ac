#!/usr/bin/env bash
# run.sh COMPILER INCLUDE_DIR SOURCE: SOURCE must compile without optimisation (a Debug build)
# for each x86-64 vector level, whatever this machine has: without __OPTIMIZE__ GCC defines
# some intrinsics as macros, which took xsimd's AVX-512 code paths out of reach before.
set -u
compiler=$1 include=$2 source=$3
status=0
for level in x86-64-v2 x86-64-v3 x86-64-v4; do
  if out=$("$compiler" -std=c++20 -O0 -march=$level -fsyntax-only -I"$include" "$source" 2>&1); then
    echo "debug_build: $source compiles at -O0 -march=$level"
  else
    echo "debug_build: $source does not compile at -O0 -march=$level:" >&2
    grep -E "error" <<<"$out" | head -5 >&2
    status=1
  fi
done
exit $status
