#!/usr/bin/env bash
# Describes a ledgerlm binary for a machine that has no checkout history (no .git travels with
# a GPU bundle): the commit, the CMake flags of its build tree, nvcc's version, its ldd output and
# the highest GLIBC symbol version it needs (the oldest C library it can run on).
#
#   scripts/gpu/build_info.sh BINARY [BUILD_DIR]
#
# Run by scripts/gpu/gpu_bundle.sh (into the bundle's BUILD_INFO) and by gpu_check.sh on a build
# tree.
set -uo pipefail
bin="${1:?usage: build_info.sh BINARY [BUILD_DIR]}"
build="${2:-$(dirname "$bin")}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
echo "binary: $bin ($(stat -c %s "$bin" 2>/dev/null || echo missing) bytes)"
echo "commit: $(git -C "$repo_root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$repo_root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
echo "built: $(date -u -r "$bin" +%FT%TZ 2>/dev/null)"
if [[ -f "$build/CMakeCache.txt" ]]; then
  echo "cmake flags:"
  grep -E '^(CMAKE_BUILD_TYPE|CMAKE_CXX_FLAGS|CMAKE_CUDA_FLAGS|CMAKE_CUDA_COMPILER|LEDGERLM_[A-Z_]+):' \
    "$build/CMakeCache.txt" | sed 's/^/  /'
fi
nvcc="$(grep -E '^CMAKE_CUDA_COMPILER:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)"
nvcc="${nvcc:-/usr/local/cuda/bin/nvcc}"
echo "nvcc: $("$nvcc" --version 2>/dev/null | tail -2 | tr '\n' ' ' || echo 'not found')"
echo "highest GLIBC symbol version needed: $(objdump -T "$bin" 2>/dev/null | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1)"
echo "ldd:"
ldd "$bin" 2>&1 | sed 's/^/  /'
