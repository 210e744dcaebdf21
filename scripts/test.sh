#!/usr/bin/env bash
# The test suite in one pytest-xdist run: `DISTMARL_TEST_WORKERS` processes (default: one per
# core; the tests' own subprocesses, Ray's processes and servers keep every core busy, and a
# worker more only adds contention). A file's tests run on one
# worker together, a free worker taking the next file (a file's tests share a Ray, a cluster,
# a server or a run that its fixtures start once), the files in the order tests/conftest.py
# gives (those using Ray first, then those with slow tests, not xdist's most-tests-first: a
# long file started last keeps one worker busy after the others have run out of files, and a
# worker shuts its Ray down once its Ray files are done); each test runs torch on one thread.
# Arguments go to pytest (e.g. -x, -k NAME, -m "not ray").
#   bash scripts/test.sh [PYTEST ARGS...]
set -uo pipefail
cd "$(dirname "$0")/.."
python="${DISTMARL_VENV:-.venv}/bin/python"
workers="${DISTMARL_TEST_WORKERS:-$("$python" -c 'import os; print(os.cpu_count() or 1)')}"

start=$SECONDS
"$python" -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
status=$?
[ "$status" -eq 5 ] && status=0  # no test selected
echo "tests: ended (exit $status) in $((SECONDS - start)) s on $workers workers"
exit "$status"
