#!/usr/bin/env bash
# check_output.sh EXPECTED_STATUS XSYM_FLAGS PROGRAM PATTERN...
# Runs PROGRAM with XSYM_FLAGS, checks its exit status, and that stdout+stderr match every
# extended regular expression given.
set -u
expected=$1 flags=$2 program=$3
shift 3
out=$(XSYM_FLAGS="$flags" "$program" 2>&1)
status=$?
echo "$out"
fail=0
if [ "$status" -ne "$expected" ]; then
  echo "check_output: exit status $status, expected $expected" >&2
  fail=1
fi
for pattern in "$@"; do
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "check_output: no line matches: $pattern" >&2
    fail=1
  fi
done
exit $fail
