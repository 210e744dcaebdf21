#!/usr/bin/env bash
# Build the CPU and CUDA images named in docker/image.env; `--push` pushes them too.
#   bash docker/build.sh            # build both
#   bash docker/build.sh --push     # build and push (docker login to the registry first)
#   VARIANTS=cpu bash docker/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=docker/image.env
source docker/image.env
push=false
[ "${1:-}" = "--push" ] && push=true

build() {  # build VARIANT TORCH_INDEX TAG
  docker build -f docker/Dockerfile \
    --build-arg RAY_VERSION="$RAY_VERSION" --build-arg PYTHON_TAG="$PYTHON_TAG" \
    --build-arg VARIANT="$1" --build-arg TORCH_VERSION="$TORCH_VERSION" \
    --build-arg TORCH_INDEX="$2" -t "$3" .
  if $push; then docker push "$3"; fi
}

for variant in ${VARIANTS:-cpu cuda}; do
  case "$variant" in
    cpu) build cpu "$CPU_TORCH_INDEX" "$CPU_IMAGE" ;;
    cuda) build gpu "$CUDA_TORCH_INDEX" "$CUDA_IMAGE" ;;
    *) echo "build.sh: unknown variant $variant (cpu or cuda)" >&2; exit 2 ;;
  esac
done
