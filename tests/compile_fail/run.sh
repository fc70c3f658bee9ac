#!/usr/bin/env bash
# run.sh COMPILER INCLUDE_DIR FILE [PCH]: FILE must fail to compile, with the text of its
# "// expect:" line in the compiler's output (a static_assert written for people). PCH: a header
# of `#include <xsym/xsym.hpp>` whose precompiled form (PCH.gch) a file that includes the library
# reads first instead of parsing it again (the errors come from the file's own instantiations
# either way).
set -u
compiler=$1 include=$2 file=$3 pch=${4:-}
expect=$(sed -n 's|^// expect: ||p' "$file" | head -1)
flags=(-std=c++20 -fsyntax-only -I"$include")
if [[ -n $pch && -f $pch.gch ]] && grep -q '^#include <xsym/xsym.hpp>' "$file"; then
  flags+=(-include "$pch" -Winvalid-pch)
fi
out=$("$compiler" "${flags[@]}" "$file" 2>&1)
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
