#!/usr/bin/env bash
# Builds what scripts/gpu/gpu_check.sh runs on a GPU machine that has only the CUDA toolkit, CMake,
# ninja and Python (no OpenBLAS, sentencepiece, OpenMPI or GoogleTest): the ledgerlm binary and
# the GPU test binaries (the backend op harness test_backend_ops, the ops at GPT-2 shapes, the
# fp64 gradient checks and tests/cuda, the NCCL Comm's one-rank test among them), built here for
# sm_90 without MPI (the NCCL Comm then wraps the single Comm; libnccl.so.2 is opened at run time
# from the GPU machine's toolkit or site-packages, never copied), plus the non-CUDA shared
# libraries they load (OpenBLAS, libgfortran, libgomp, sentencepiece, tomlplusplus, libstdc++, ...). The CUDA libraries (cudart, cuBLAS, cuBLASLt) are
# never copied: the GPU machine's toolkit or its Python site-packages (nvidia/*/lib) provide them;
# BUILD_INFO records the commit, flags, nvcc version, ldd output and the newest GLIBC needed. Also writes DIR.tar.xz (the copy to send
# where transfers are size-limited) and prints both sizes.
#
#   scripts/gpu/gpu_bundle.sh [--out DIR]      (default build-gpu-bundle/bundle)
#
# Environment: LEDGERLM_CUDA_ARCHITECTURES (default 90).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
out="build-gpu-bundle/bundle"
if [[ "${1:-}" == "--out" ]]; then out="$2"; fi
export PATH=/usr/local/cuda/bin:$PATH
build=build-gpu-bundle
# Without oneDNN (its library alone is ~40 MB): the bundle's CPU reference runs its fp32 GEMMs on
# OpenBLAS, and the copy stays within the GPU machine's 64 MiB.
bash scripts/cudnn_frontend.sh "$build"  # precision.attention = cudnn (headers only)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEDGERLM_CUDA=ON -DLEDGERLM_MPI=OFF \
  -DLEDGERLM_ONEDNN=OFF -DLEDGERLM_CUDA_ARCHITECTURES="${LEDGERLM_CUDA_ARCHITECTURES:-90}" >/dev/null
targets=(ledgerlm test_backend_ops test_cuda_training test_cuda_device test_cudnn_attention
  test_backend_gpt2_shapes test_ops_gradcheck test_model_gradcheck test_model_lora_gradcheck
  test_comm_nccl)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/ledgerlm" "$out/bin/"
for t in "${targets[@]:1}"; do cp "$build/tests/$t" "$out/bin/"; done
strip --strip-unneeded "$out"/bin/* 2>/dev/null || true
# Shared libraries: everything ldd resolves except the C library and loader, which every Linux
# has, and the CUDA libraries, which the GPU machine's toolkit has.
for f in "$out"/bin/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  base="$(basename "$lib")"
  case "$base" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libcuda.so*|libcudart*|libcublas*|libnvrtc*|libnvJitLink*) continue ;;
  esac
  cp -L "$lib" "$out/lib/$base"
done
strip --strip-unneeded "$out"/lib/* 2>/dev/null || true
# What was built from what (no .git travels with the bundle): gpu_check.sh puts it in
# environment.txt.
scripts/gpu/build_info.sh "$build/ledgerlm" "$build" >"$out/BUILD_INFO"
cat >"$out/README" <<TXT
ledgerlm GPU bundle (built $(date -u +%Y-%m-%d) for sm_${LEDGERLM_CUDA_ARCHITECTURES:-90}).
Run from the repository root: scripts/gpu/gpu_check.sh --out DIR (finds this bundle, sets
LD_LIBRARY_PATH to lib/, then the toolkit's and Python site-packages' CUDA libraries). Contents: $(ls "$out/bin" | tr '\n' ' ')
Libraries: $(ls "$out/lib" | tr '\n' ' ')
TXT
# The compressed copy is what a size-limited copy takes (gpu_check.sh unpacks it).
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
echo "gpu_bundle: $out: $(du -sb "$out" | cut -f1) bytes unpacked, $out.tar.xz: $(du -sb "$out.tar.xz" | cut -f1) bytes"
ls -la "$out/bin" "$out/lib"
