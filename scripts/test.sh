#!/usr/bin/env bash
# The test suite in two parts:
#   1. the tests that need no Ray, spread over the machine's cores (pytest-xdist, an idle
#      worker taking tests from a busy one; each test runs torch on one thread),
#      `DISTMARL_TEST_WORKERS` processes (default: one per core);
#   2. the tests on a real Ray or Ray cluster, one at a time: each starts actors that want the
#      cores to themselves, and some time how fast a stop or a restart is.
# Arguments go to both parts (e.g. -x, -k NAME); a part that selects no test passes.
#   bash scripts/test.sh [PYTEST ARGS...]
set -uo pipefail
cd "$(dirname "$0")/.."
python="${DISTMARL_VENV:-.venv}/bin/python"

part() {
  local name=$1 start=$SECONDS status
  shift
  echo "tests: $name"
  "$python" -m pytest -q "$@"
  status=$?
  [ "$status" -eq 5 ] && status=0  # no test selected
  echo "tests: $name ended (exit $status) in $((SECONDS - start)) s"
  return "$status"
}

part "without Ray, on every core" -n "${DISTMARL_TEST_WORKERS:-auto}" --dist worksteal \
  -m "not ray" "$@" || exit
part "on Ray, one at a time" -m ray "$@"
