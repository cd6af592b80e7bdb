#!/usr/bin/env bash
# Installs ledgerlm's dependencies from Debian's apt (only what is missing; quiet when all is
# there) and builds into build/. The CUDA backend is built when a GPU is present or
# LEDGERLM_CUDA=on (and nvcc is found).
#   LEDGERLM_SETUP       all (default): every package, the tests' included, and every target;
#                        runtime: only what building and running the ledgerlm binary needs, and
#                        only that target (scripts/demo.sh: no test-only packages such as
#                        python3-torch or GoogleTest, no test executables)
#   LEDGERLM_BUILD_DIR   build directory (default: build)
#   LEDGERLM_CUDA        on | off | auto (default auto: on when nvidia-smi sees a GPU)
#   LEDGERLM_SANITIZE    on: AddressSanitizer + UBSan build (CUDA off, -O1)
#   LEDGERLM_CUDA_ARCHITECTURES  the GPU architectures of a CUDA build (default: CMake's, "80;90")
#   LEDGERLM_CCACHE_DIR  the compiler cache (default: $CCACHE_DIR, else ~/.cache/ccache)
#   LEDGERLM_CCACHE_SIZE its size limit (default 8G)
#   LEDGERLM_CCACHE=off  compile without ccache
set -euo pipefail
cd "$(dirname "$0")/.."

setup=${LEDGERLM_SETUP:-all}
case "$setup" in all | runtime) ;; *) echo "setup: LEDGERLM_SETUP=$setup: expected all or runtime" >&2; exit 2 ;; esac
# What building and running ledgerlm needs (libdnnl: the faster fp32 GEMMs; libpcre2-dev and
# libutf8proc-dev: Hugging Face tokenizers' split regexes and NFC; python3, bible-kjv,
# xz-utils, bzip2: scripts/demo.sh and scripts/prepare_default.sh).
packages=(build-essential cmake ninja-build pkg-config libcli11-dev libtomlplusplus-dev
  libsentencepiece-dev libpcre2-dev libutf8proc-dev libopenblas-openmp-dev libdnnl-dev
  nlohmann-json3-dev libssl-dev ccache
  python3 bible-kjv xz-utils bzip2)
# The rest: multi-process training and its tests (OpenMPI), the tests and their references
# (GoogleTest, PyTorch, NumPy, SciPy, matplotlib: also `study report`; python3-protobuf: the
# tests' TensorBoard reader), clang + libFuzzer (scripts/fuzz.sh), python3-pip (the cuDNN
# frontend's headers for CUDA builds, scripts/cudnn_frontend.sh), slurm-wlm and munge (the
# one-node Slurm that tests/slurm/test_slurm_study.sh starts; their services are not started).
if [ "$setup" = all ]; then
  packages+=(libopenmpi-dev openmpi-bin libgtest-dev python3-torch python3-numpy python3-scipy
    python3-matplotlib python3-protobuf clang libclang-rt-14-dev python3-pip slurm-wlm munge)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${LEDGERLM_BUILD_DIR:-build}
cuda=${LEDGERLM_CUDA:-auto}
if [ "$cuda" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then cuda=on; else cuda=off; fi
fi
if [ "$cuda" = on ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
sanitize=OFF
if [ "${LEDGERLM_SANITIZE:-off}" = on ]; then sanitize=ON; cuda=off; fi
cuda_flag=OFF
[ "$cuda" = on ] && cuda_flag=ON

# ccache for C++ and CUDA (scripts/fuzz.sh uses the same settings): one cache for every checkout
# on the machine. Paths under the checkout are hashed relative to it (base_dir) and the build's
# working directory is left out of the hash, so a fresh clone in another folder (CI) reuses what
# the developer's builds compiled. The settings travel in the launcher itself, so a later
# `ninja -C build` uses them too.
launcher=(-UCMAKE_CXX_COMPILER_LAUNCHER -UCMAKE_CUDA_COMPILER_LAUNCHER)
if [ "${LEDGERLM_CCACHE:-on}" != off ] && command -v ccache >/dev/null 2>&1; then
  ccache_dir=${LEDGERLM_CCACHE_DIR:-${CCACHE_DIR:-$HOME/.cache/ccache}}
  ccache_launcher="/usr/bin/env;CCACHE_DIR=$ccache_dir;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1"
  ccache_launcher+=";CCACHE_MAXSIZE=${LEDGERLM_CCACHE_SIZE:-8G};$(command -v ccache)"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$ccache_launcher" -DCMAKE_CUDA_COMPILER_LAUNCHER="$ccache_launcher")
fi

# CUDA builds: the cuDNN frontend headers (precision.attention = cudnn) into the build directory.
if [ "$cuda" = on ]; then bash scripts/cudnn_frontend.sh "$build_dir"; fi

# runtime: the ledgerlm target alone, configured without the tests (GoogleTest is not installed).
tests=ON
targets=()
if [ "$setup" = runtime ]; then tests=OFF targets=(--target ledgerlm); fi
arch=()
if [ -n "${LEDGERLM_CUDA_ARCHITECTURES:-}" ]; then
  arch=(-DLEDGERLM_CUDA_ARCHITECTURES="$LEDGERLM_CUDA_ARCHITECTURES")
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEDGERLM_CUDA=$cuda_flag \
  -DLEDGERLM_SANITIZE=$sanitize -DLEDGERLM_TESTS=$tests "${launcher[@]}" "${arch[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
