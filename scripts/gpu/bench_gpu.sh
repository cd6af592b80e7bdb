#!/usr/bin/env bash
# GPT-2 124M on the GPU (L12 H12 C768 T1024, vocab 50304): bf16 parameters with fp32 master
# weights, bf16 GEMMs, AdamW, random tokens (`ledgerlm bench --train.device cuda`). Tries the
# micro-batch sizes in BENCH_MICRO_BATCHES (largest first) and reports the first that fits:
# tokens/s, and MFU against the GPU's dense bf16 peak (BENCH_PEAK_TFLOPS, default 989 for
# H100/H200 SXM) from 6 N + 6 L T C flops per token. Prints figures; never fails on timing.
#
#   scripts/gpu/bench_gpu.sh [--out DIR] [extra ledgerlm bench flags...]
#
# Environment: LEDGERLM_BIN (default build-cuda/ledgerlm), BENCH_STEPS (default 5),
# BENCH_WARMUP (default 2), BENCH_MICRO_BATCHES (default "16 8 4 2 1"), BENCH_DEADLINE (default
# 240: seconds for all tries together; each try gets at most BENCH_TRY_S, default 120, and what
# is left of the deadline, so the tries fit a caller's cap).
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
out=""
if [[ "${1:-}" == "--out" ]]; then out="$2"; shift 2; fi
bin="${LEDGERLM_BIN:-build-cuda/ledgerlm}"
steps="${BENCH_STEPS:-5}"
warmup="${BENCH_WARMUP:-2}"
peak="${BENCH_PEAK_TFLOPS:-989}"
[[ -x "$bin" ]] || { echo "bench_gpu: error: $bin not found (set LEDGERLM_BIN)" >&2; exit 1; }
[[ -n "$out" ]] && mkdir -p "$out"
log="${out:-/tmp}/bench_gpu.log"
: >"$log"
bench_start=$(date +%s)
bench_deadline="${BENCH_DEADLINE:-240}"
for mb in ${BENCH_MICRO_BATCHES:-16 8 4 2 1}; do
  try_s="${BENCH_TRY_S:-120}"
  left=$((bench_deadline - ($(date +%s) - bench_start) - 3))
  ((try_s > left)) && try_s=$left
  if ((try_s < 10)); then
    echo "bench_gpu: deadline of $bench_deadline s reached before micro_batch $mb" | tee -a "$log"
    break
  fi
  echo "bench_gpu: micro_batch $mb (at most $try_s s)" | tee -a "$log"
  if timeout "$try_s" "$bin" bench --train.device cuda --model.n_layer 12 --model.n_head 12 \
      --model.n_embd 768 --model.block_size 1024 --model.vocab_size 50304 \
      --train.seq_len 1024 --train.micro_batch "$mb" --optim.name adamw \
      --precision.params bf16 --precision.matmul bf16 \
      --steps "$steps" --warmup "$warmup" "$@" >>"$log" 2>&1; then
    python3 - "$log" "$mb" "$peak" <<'PY'
import json, sys
log, mb, peak = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rec = None
for line in open(log):
    if "bench_json" in line:
        rec = json.loads(line[line.index("{"):])
if rec is None:
    print("bench_gpu: no bench_json line in", log); sys.exit(0)
tps = rec.get("tokens_per_s") or rec.get("tokens_per_sec")
n = 124_000_000
L, T, C = 12, 1024, 768
flops_per_token = 6 * n + 6 * L * T * C
print(f"bench_gpu: micro_batch {mb}: tokens/s {tps}")
if tps:
    print(f"bench_gpu: MFU vs dense bf16 peak {peak:.0f} TFLOPS: {100 * tps * flops_per_token / (peak * 1e12):.2f}%")
for k, v in rec.items():
    if "peak" in k or "tracked" in k or "ms" in k:
        print(f"bench_gpu: {k}: {v}")
PY
    exit 0
  fi
  echo "bench_gpu: micro_batch $mb did not run (out of memory or an error): see $log" | tee -a "$log"
  tail -3 "$log"
done
echo "bench_gpu: no micro-batch ran"
exit 0
