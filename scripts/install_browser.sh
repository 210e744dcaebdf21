#!/usr/bin/env bash
# Install Debian's Chromium for the test that opens a run's video in the MLflow UI
# (tests/tracking/test_mlflow_run.py); without it that test skips. Needs apt and root; does
# nothing where a chromium is already on PATH.
#
#   bash scripts/install_browser.sh
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: no apt-get here: install Chromium by hand (the browser test skips without it)" >&2
  exit 1
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium
