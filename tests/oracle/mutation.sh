#!/usr/bin/env bash
# The mutation check: test_oracle must pass with no fault in force, and fail with each fault of
# the library's test hook (include/xsym/backend/cpu/fault.hpp) in force: every scalar op (in both
# kernel sets, and in each alone), product, reduction and executor path. A fault it passes with
# is a kind of wrong answer the suite would not notice.
#   mutation.sh <path to test_oracle> [parallel jobs, default 2]
set -u
bin=$1
jobs=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

if ! XSYM_TEST_FAULT= "$bin" >"$work/none.log" 2>&1; then
  echo "mutation_check: test_oracle fails with no fault in force:"
  tail -40 "$work/none.log"
  exit 1
fi
targets=$(XSYM_TEST_FAULT= "$bin" "[fault_targets]" | sed -n 's/^fault target: //p')
count=$(echo "$targets" | wc -w)
if [ "$count" -lt 40 ]; then
  echo "mutation_check: test_oracle lists $count fault targets; expected every op, product and reduction"
  exit 1
fi

# One run per target, stopping at the first failure (-a). Caught: Catch's failure count as the
# status (1 to 127). Passed: not caught. Anything else (a crash, an unknown fault) is an error.
export bin work
echo "$targets" | xargs -P "$jobs" -I{} sh -c '
  XSYM_TEST_FAULT="$1" "$bin" -a >"$work/$1.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then echo "$1" >>"$work/uncaught"
  elif [ "$rc" -ge 128 ] || grep -q "unknown fault" "$work/$1.log"; then echo "$1 (status $rc)" >>"$work/broken"
  fi' _ {}

status=0
if [ -s "$work/uncaught" ]; then
  echo "mutation_check: test_oracle passed with these faults in force (the suite would not notice them):"
  sort "$work/uncaught" | sed 's/^/  /'
  status=1
fi
if [ -s "$work/broken" ]; then
  echo "mutation_check: these runs crashed or did not start:"
  sort "$work/broken" | sed 's/^/  /'
  status=1
fi
[ "$status" -eq 0 ] && echo "mutation_check: all $count faults caught ($(($(date +%s) - start)) s)"
exit "$status"
