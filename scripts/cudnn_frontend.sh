#!/usr/bin/env bash
# Installs the cuDNN frontend's headers (header-only C++ graph API, used by the CUDA backend's
# precision.attention = cudnn) into BUILD_DIR/third_party/cudnn_frontend/include, where CMake
# looks for them (LEDGERLM_CUDNN_FRONTEND_INCLUDE). Called by scripts/setup.sh for CUDA builds
# and by scripts/gpu/gpu_bundle.sh. Does nothing when that version is already there.
#   usage: scripts/cudnn_frontend.sh BUILD_DIR
#   LEDGERLM_CUDNN_FRONTEND=required  fail when the headers cannot be had (scripts/test.sh sets it
#                                     for CUDA builds, so CI always compiles the cuDNN attention)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/cudnn_frontend.sh BUILD_DIR}

# The cuDNN frontend (header-only C++ graph API; precision.attention = cudnn) for CUDA builds:
# a pinned version of the nvidia-cudnn-frontend Python package, its include/ unpacked into the
# build directory (never into the source tree). Without it the build still succeeds and CMake
# says the cuDNN attention is not built.
cudnn_frontend_version=1.32.0
cudnn_frontend_dir="$build_dir/third_party/cudnn_frontend"
if [ "$(cat "$cudnn_frontend_dir/VERSION" 2>/dev/null)" != "$cudnn_frontend_version" ]; then
  wheel_dir=$(mktemp -d)
  if /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheel_dir" \
      "nvidia-cudnn-frontend==$cudnn_frontend_version" >"$wheel_dir/pip.log" 2>&1; then
    rm -rf "$cudnn_frontend_dir"
    mkdir -p "$cudnn_frontend_dir"
    /usr/bin/python3 - "$wheel_dir" "$cudnn_frontend_dir" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
    echo "$cudnn_frontend_version" >"$cudnn_frontend_dir/VERSION"
  else
    reason=$(tail -n 1 "$wheel_dir/pip.log")
    if [ "${LEDGERLM_CUDNN_FRONTEND:-}" = required ]; then
      echo "cudnn_frontend: could not download the cuDNN frontend $cudnn_frontend_version ($reason)" >&2
      rm -rf "$wheel_dir"
      exit 1
    fi
    echo "cudnn_frontend: could not download the cuDNN frontend $cudnn_frontend_version ($reason): building without the cuDNN attention"
  fi
  rm -rf "$wheel_dir"
fi

