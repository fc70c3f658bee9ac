#!/usr/bin/env bash
# run.sh COMPILER INCLUDE_DIR FILE: FILE must fail to compile, with the text of its
# "// expect:" line in the compiler's output (a static_assert written for people).
set -u
compiler=$1 include=$2 file=$3
expect=$(sed -n 's|^// expect: ||p' "$file" | head -1)
out=$("$compiler" -std=c++20 -fsyntax-only -I"$include" "$file" 2>&1)
if [ $? -eq 0 ]; then
  echo "compile_fail: $file compiled, but it must not" >&2
  exit 1
fi
if ! grep -qF -- "$expect" <<<"$out"; then
  echo "compile_fail: $file failed without the expected message: $expect" >&2
  echo "$out" | grep -E "error" | head -5 >&2
  exit 1
fi
echo "compile_fail: $file rejected with: $expect"
