#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv and install distmarl into it.
#
#   bash scripts/setup_env.sh          # runtime dependencies
#   bash scripts/setup_env.sh dev      # plus test tools
#   bash scripts/setup_env.sh dev,bench  # plus AgileRL / RLlib for side-by-side benchmarks
#
# On a machine without an NVIDIA GPU the CPU build of torch is installed first, so that the
# `torch` requirement never pulls a multi-GB CUDA build. Set DISTMARL_TORCH_INDEX to a pip index
# URL that serves CPU wheels where PyPI's default wheel for your platform is a CUDA build.
# Re-running is cheap: a stamp file records what was installed from which pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
venv="${DISTMARL_VENV:-.venv}"
python="${PYTHON:-python3}"
torch_version="${DISTMARL_TORCH_VERSION:-2.13.0}"

if [ ! -x "$venv/bin/python" ]; then
  echo "setup_env: creating $venv with $($python --version)"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)

stamp="$venv/.distmarl-installed"
want="$(sha256sum pyproject.toml | cut -c1-16) extras=[$extras] torch=$torch_version"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup_env: NVIDIA GPU found, installing torch==$torch_version with CUDA"
    "${pip[@]}" install "torch==$torch_version"
  else
    echo "setup_env: no GPU, installing the CPU build of torch==$torch_version"
    if [ -n "${DISTMARL_TORCH_INDEX:-}" ]; then
      "${pip[@]}" install "torch==$torch_version" --index-url "$DISTMARL_TORCH_INDEX"
    else
      "${pip[@]}" install "torch==$torch_version"
    fi
  fi
fi

target="."
[ -n "$extras" ] && target=".[$extras]"
echo "setup_env: installing distmarl$([ -n "$extras" ] && echo "[$extras]") into $venv"
"${pip[@]}" install -e "$target" 2> >(grep -v "is neither a file nor a directory" >&2)
echo "$want" > "$stamp"
