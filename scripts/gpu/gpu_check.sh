#!/usr/bin/env bash
# One prepared check for a GPU machine (see docs/gpu.md): the CUDA tests, a 200-step training
# run of the small shape on the GPU next to the same run on the CPU, and scripts/gpu/bench_gpu.sh,
# with every log under DIR. Meant to finish in about 4 minutes on an H100/H200 (each stage has
# its own timeout) so that a short slot leaves room for one rerun.
#
#   scripts/gpu/gpu_check.sh --out DIR
#
# Binaries: a bundle made by scripts/gpu/gpu_bundle.sh (GPU_BUNDLE=dir, default build-gpu-bundle/
# bundle, unpacked from bundle.tar.xz when only that was copied: binaries plus the few non-CUDA
# shared libraries they need), else a CUDA
# build in build-cuda (LEDGERLM_CUDA=on scripts/setup.sh). The machine needs the CUDA driver
# and toolkit libraries (cudart, cuBLAS, cuBLASLt) and Python 3; nothing else.
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    *) echo "gpu_check: unknown argument $1 (usage: gpu_check.sh --out DIR)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "usage: scripts/gpu/gpu_check.sh --out DIR" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
start=$(date +%s)
stage() { echo "gpu_check: [$(($(date +%s) - start)) s] $*" | tee -a "$out/summary.txt"; }

# The toolkit's libraries (cudart, cuBLAS, cuBLASLt) where the loader may not look by itself.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
bundle="${GPU_BUNDLE:-build-gpu-bundle/bundle}"
if [[ ! -x "$bundle/bin/ledgerlm" && -f "$bundle.tar.xz" ]]; then
  tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz"
fi
if [[ -x "$bundle/bin/ledgerlm" ]]; then
  bin_dir="$(cd "$bundle/bin" && pwd)"
  export LD_LIBRARY_PATH="$(cd "$bundle/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  stage "using the bundle $bundle ($(du -sh "$bundle" | cut -f1))"
elif [[ -x build-cuda/ledgerlm ]]; then
  bin_dir="$repo_root/build-cuda"
  stage "using build-cuda"
else
  stage "error: no bundle ($bundle) and no build-cuda/ledgerlm: run scripts/gpu/gpu_bundle.sh or LEDGERLM_CUDA=on scripts/setup.sh"
  exit 1
fi
find_test() { for d in "$bin_dir" "$bin_dir/tests"; do [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }; done; }
export LEDGERLM_TEST_BINARY="$bin_dir/ledgerlm"
export LEDGERLM_TEST_SOURCE_DIR="$repo_root"
export OMP_WAIT_POLICY=PASSIVE
(nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv) \
  >"$out/device.txt" 2>&1 || true
stage "device: $(head -1 "$out/device.txt")"

status=0
run_test() {  # name timeout_s
  local t
  t="$(find_test "$1")"
  if [[ -z "$t" ]]; then stage "$1: not built"; status=1; return; fi
  timeout "$2" "$t" --gtest_output="xml:$out/$1.xml" >"$out/$1.log" 2>&1
  local rc=$?
  stage "$1: exit $rc ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/$1.log" | tr '\n' ' '))"
  [[ $rc -eq 0 ]] || status=1
}
run_test test_cuda_device 30
run_test test_backend_ops 60
run_test test_cuda_training 120

# 200 steps of the small shape on the GPU and on the CPU, random-text corpus, bytes tokenizer.
data="$out/data"
python3 -c "
import random
random.seed(5)
w='the lord said unto moses and land of egypt went up into mountain people light day'.split()
print(' '.join(random.choice(w) for _ in range(200000)))" >"$out/corpus.txt"
"$bin_dir/ledgerlm" prepare --input "$out/corpus.txt" --out "$data" --tokenizer bytes \
  >"$out/prepare.log" 2>&1 || stage "prepare failed (see prepare.log)"
for dev in cuda cpu; do
  steps=200
  [[ $dev == cpu ]] && steps=10  # the CPU reference for the first steps only (time budget)
  timeout 60 "$bin_dir/ledgerlm" train --data.dir "$data" --train.out_dir "$out/runs" \
    --train.name "small_$dev" --model.n_layer 6 --model.n_head 6 --model.n_embd 384 \
    --model.block_size 256 --train.seq_len 256 --train.micro_batch 8 --train.max_steps $steps \
    --train.eval_interval 0 --train.log_interval 20 --train.device $dev \
    >"$out/train_small_$dev.log" 2>&1
  rc=$?
  [[ $dev == cuda && $rc -ne 0 ]] && status=1
  stage "train small on $dev ($steps steps): exit $rc ($(grep -c '"loss"' "$out/runs/small_$dev/metrics.jsonl" 2>/dev/null) loss records)"
done
python3 - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, sys
out = sys.argv[1]
def losses(dev):
    try:
        return {r["step"]: r["loss"] for r in map(json.loads, open(f"{out}/runs/small_{dev}/metrics.jsonl")) if "loss" in r}
    except OSError:
        return {}
g, c = losses("cuda"), losses("cpu")
common = sorted(set(g) & set(c))
if common:
    worst = max(abs(g[s] - c[s]) / abs(c[s]) for s in common)
    print(f"gpu_check: small shape, steps 1..{common[-1]}: max relative loss difference GPU vs CPU {worst:.2e}")
if g:
    print(f"gpu_check: small shape on the GPU: loss {g[min(g)]:.4f} at step {min(g)} -> {g[max(g)]:.4f} at step {max(g)}")
PY

LEDGERLM_BIN="$bin_dir/ledgerlm" BENCH_STEPS=4 BENCH_WARMUP=1 scripts/gpu/bench_gpu.sh --out "$out" \
  >"$out/bench_summary.txt" 2>&1
stage "bench_gpu: $(grep -E 'tokens/s|MFU|no micro' "$out/bench_summary.txt" | tr '\n' ' ')"
stage "done (status $status)"
exit $status
