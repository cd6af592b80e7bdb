#!/usr/bin/env bash
# GPT-2 124M on the GPU (L12 H12 C768 T1024, vocab 50304): bf16 parameters with fp32 master
# weights, bf16 GEMMs, AdamW, random tokens (`ledgerlm bench --train.device cuda`), at the largest
# micro-batch that runs; then checks what it ran.
#
#   scripts/gpu/bench_gpu.sh [--out DIR] [extra ledgerlm bench flags...]
#
# Where it starts: the planner (`ledgerlm memory`) predicts each candidate micro-batch's peak;
# the first (largest) whose prediction is within BENCH_MEMORY_FRACTION (default 0.95) of the
# device's memory is tried first (the smallest when none is). Without a memory size (no
# nvidia-smi, no BENCH_DEVICE_MEMORY_GB) or a prediction, it starts at the largest candidate.
# A try that fails with out-of-memory moves on to the next smaller micro-batch; any other failure
# (an error, a crash, its time cap) stops here and is reported. The run that ran is checked: a
# bench_json line, every logged loss finite, the last below the first. The bench itself reports
# tokens/s and MFU (against the device's datasheet peak and a measured GEMM).
#
# Exit status: 0 when a micro-batch ran and passed the checks; 1 when none ran, a try failed with
# anything but out-of-memory, or a check failed; 2 on bad usage. The last line says which.
#
# Environment: LEDGERLM_BIN (default build-cuda/ledgerlm), BENCH_DEVICE (default cuda),
# BENCH_SHAPE (model and precision flags; default the shape above), BENCH_STEPS (default 5),
# BENCH_WARMUP (default 2), BENCH_MICRO_BATCHES (default "16 8 4 2 1", largest first),
# BENCH_DEVICE_MEMORY_GB (default: nvidia-smi's memory.total of device 0), BENCH_DEADLINE
# (default 240: seconds for all tries together; each try gets at most BENCH_TRY_S, default 120,
# and what is left of the deadline, so the tries fit a caller's cap).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_gpu build-cuda/ledgerlm
out=""
if [[ "${1:-}" == "--out" ]]; then
  [[ -n "${2:-}" ]] || die "--out needs a directory" 2
  out="$2"
  shift 2
fi
device="${BENCH_DEVICE:-cuda}"
shape="${BENCH_SHAPE:---model.n_layer 12 --model.n_head 12 --model.n_embd 768 --model.block_size 1024 --model.vocab_size 50304 --train.seq_len 1024 --optim.name adamw --precision.params bf16 --precision.matmul bf16}"
steps="${BENCH_STEPS:-5}"
warmup="${BENCH_WARMUP:-2}"
fraction="${BENCH_MEMORY_FRACTION:-0.95}"
[[ -x "$bin" ]] || die "$bin not found or not executable (set LEDGERLM_BIN)" 2
[[ -n "$out" ]] && mkdir -p "$out"
dir="${out:-$(mktemp -d /tmp/bench_gpu.XXXXXX)}"
log="$dir/bench_gpu.log"
: >"$log"
say() { echo "bench_gpu: $*" | tee -a "$log"; }
read -ra shape_flags <<<"$shape"

# --- the start: the largest micro-batch the planner predicts to fit ----------------------------
mem_gb="${BENCH_DEVICE_MEMORY_GB:-}"
if [[ -z "$mem_gb" ]] && command -v nvidia-smi >/dev/null; then
  mib="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)"
  [[ "$mib" =~ ^[0-9]+$ ]] && mem_gb="$(awk -v m="$mib" 'BEGIN { printf "%.3f", m * 1048576 / 1e9 }')"
fi
read -ra candidates <<<"${BENCH_MICRO_BATCHES:-16 8 4 2 1}"
for mb in "${candidates[@]}"; do
  [[ "$mb" =~ ^[1-9][0-9]*$ ]] || {
    echo "bench_gpu: error: BENCH_MICRO_BATCHES must be positive whole numbers, got '$mb'" >&2
    exit 2
  }
done
((${#candidates[@]} > 0)) || { echo "bench_gpu: error: BENCH_MICRO_BATCHES is empty" >&2; exit 2; }
start=0
if [[ -n "$mem_gb" ]]; then
  start=-1
  for i in "${!candidates[@]}"; do
    mb="${candidates[$i]}"
    # "predicted peak per rank   17.821" (GB = 1e9 bytes)
    pred="$("$bin" memory "${shape_flags[@]}" --train.device "$device" --train.micro_batch "$mb" \
      2>>"$log" | awk '/^predicted peak per rank/ { print $NF }')"
    if [[ -z "$pred" ]]; then
      say "memory planner gave no prediction for micro_batch $mb: starting at ${candidates[0]}"
      start=0
      break
    fi
    if awk -v p="$pred" -v m="$mem_gb" -v f="$fraction" 'BEGIN { exit !(p <= f * m) }'; then
      say "micro_batch $mb: predicted peak $pred GB within $fraction of $mem_gb GB: starting there"
      start=$i
      break
    fi
    say "micro_batch $mb: predicted peak $pred GB over $fraction of $mem_gb GB: skipped"
  done
  if ((start < 0)); then
    # A prediction, not a measurement: the smallest still gets its try.
    start=$((${#candidates[@]} - 1))
    say "no micro-batch of ${candidates[*]} is predicted to fit $mem_gb GB: trying ${candidates[$start]}"
  fi
else
  say "device memory unknown (no nvidia-smi, BENCH_DEVICE_MEMORY_GB unset): starting at ${candidates[0]}"
fi

# --- the tries ---------------------------------------------------------------------------------
is_oom() {  # log file: did the run fail for want of memory?
  grep -qiE 'out of (device |host )?memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED' "$1"
}
bench_start=$(date +%s)
bench_deadline="${BENCH_DEADLINE:-240}"
ran=""
for mb in "${candidates[@]:$start}"; do
  try_s="${BENCH_TRY_S:-120}"
  left=$((bench_deadline - ($(date +%s) - bench_start) - 3))
  ((try_s > left)) && try_s=$left
  if ((try_s < 10)); then
    say "FAILED: deadline of $bench_deadline s reached before micro_batch $mb"
    exit 1
  fi
  try_log="$dir/bench_mb$mb.log"
  say "micro_batch $mb (at most $try_s s)"
  timeout "$try_s" "$bin" bench "${shape_flags[@]}" --train.device "$device" \
    --train.micro_batch "$mb" --steps "$steps" --warmup "$warmup" "$@" >"$try_log" 2>&1
  rc=$?
  cat "$try_log" >>"$log"
  if ((rc == 0)); then
    ran="$mb"
    break
  fi
  if ((rc == 124)); then
    say "FAILED: micro_batch $mb ran past its cap of $try_s s: stopping (see $try_log)"
    exit 1
  fi
  if is_oom "$try_log"; then
    say "micro_batch $mb: out of memory: $(grep -iE 'out of|memory' "$try_log" | tail -1 | cut -c1-200)"
    continue
  fi
  tail -5 "$try_log" | sed 's/^/  /' | tee -a "$log"
  say "FAILED: micro_batch $mb exited $rc with an error that is not out-of-memory: stopping"
  exit 1
done
if [[ -z "$ran" ]]; then
  say "FAILED: no micro-batch of ${candidates[*]:$start} fit in memory"
  exit 1
fi

# --- the checks --------------------------------------------------------------------------------
grep -E '^(gpu:|measured GEMM|achieved|tokens/s|step \(|loss by step)' "$try_log" | sed 's/^/  /' | tee -a "$log"
python3 - "$try_log" "$ran" <<'PY' 2>&1 | tee -a "$log"
import json, math, sys
path, mb = sys.argv[1], sys.argv[2]
rec = None
for line in open(path):
    if line.startswith("bench_json "):
        rec = json.loads(line[len("bench_json "):])
if rec is None:
    print(f"bench_gpu: FAILED: micro_batch {mb}: no bench_json line in {path}")
    sys.exit(1)
print(f"bench_gpu: micro_batch {mb}: tokens/s {rec['tokens_per_s']:.0f}")
gpu = rec.get("gpu") or {}
if rec.get("mfu") is not None and rec["mfu"] > 0:
    against = (f"the datasheet peak of the {gpu['table_entry']}" if gpu.get("table_entry")
               else "this CPU's measured peak")
    print(f"bench_gpu: MFU {100 * rec['mfu']:.2f}% of {against}")
elif gpu:
    print(f"bench_gpu: no datasheet peak for '{gpu.get('device', '')}': MFU against the measured "
          "GEMM rate only")
if gpu.get("mfu_vs_measured_gemm"):
    print(f"bench_gpu: MFU {100 * gpu['mfu_vs_measured_gemm']:.2f}% of the measured GEMM rate "
          f"{gpu.get('gemm_matmul_tflops', 0):.1f} TFLOP/s")
losses = rec.get("losses") or []
bad = [i + 1 for i, x in enumerate(losses) if x is None or not math.isfinite(x)]
if len(losses) < 2:
    print(f"bench_gpu: FAILED: {len(losses)} logged losses; the check needs two")
    sys.exit(1)
if bad:
    print(f"bench_gpu: FAILED: non-finite loss at step(s) {bad}: {losses}")
    sys.exit(1)
if not losses[-1] < losses[0]:
    print(f"bench_gpu: FAILED: loss not falling: step 1 {losses[0]:.4f} -> "
          f"step {len(losses)} {losses[-1]:.4f}")
    sys.exit(1)
print(f"bench_gpu: loss finite and falling: step 1 {losses[0]:.4f} -> "
      f"step {len(losses)} {losses[-1]:.4f}")
PY
check=${PIPESTATUS[0]}
if ((check != 0)); then
  say "FAILED: micro_batch $ran ran but its checks failed"
  exit 1
fi
say "ok: micro_batch $ran ran and passed its checks (log: $log)"
exit 0
