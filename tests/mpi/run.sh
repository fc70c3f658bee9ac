#!/usr/bin/env bash
# run.sh <mpiexec> <ranks> <program> [args]: the program on that many ranks of this machine,
# oversubscribed (CI has 2 cores), and allowed to run as root where the tests run as root.
set -euo pipefail
mpiexec=$1 ranks=$2
shift 2
flags=(-np "$ranks")
if "$mpiexec" --version 2>/dev/null | grep -qiE "open ?mpi|openrte"; then
  flags+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
exec "$mpiexec" "${flags[@]}" "$@"
