#!/usr/bin/env bash
# Experiment: the memory ledger of the "small" shape (configs/bench_small.toml: L6 H6 C384,
# T256, B8) on the default KJV corpus, measured per component by the tracking allocator and
# compared with the planner's prediction, for:
#   - each optimizer (sgd, adamw, lamb, lars, adafactor, adamw8bit), fp32 params;
#   - fp32 params vs bf16 params (+ bf16 grads) with an fp32 master (AdamW), and the same with
#     precision.matmul = bf16 (packed bf16 GEMM operands in the workspace);
#   - recompute none / mlp / block (AdamW);
#   - micro-batch 1/2/4/8 at a fixed global batch of 8 sequences (accumulation 8/4/2/1).
# Each run trains a few steps (runs/NAME/ledger.json keeps predicted and measured). Writes
# results/memory/table.md (measured MB per component, predicted vs measured error, the accuracy
# bar: model state within 1%, activations and peak within 10%) and results/memory/memory.png
# (stacked bars of measured bytes per component).
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), EXP_STEPS (default 3), EXP_OUT (default
# results/memory), EXP_THREADS (default 0: all cores).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start exp_memory
steps="${EXP_STEPS:-3}"
out="${EXP_OUT:-results/memory}"
threads="${EXP_THREADS:-0}"

need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_default_corpus
mkdir -p "$out/runs"
manifest="$out/manifest.tsv"
: >"$manifest"

# The small shape with the corpus's vocabulary (model.vocab_size = 0: taken from meta.json).
common=(--config configs/bench_small.toml --model.vocab_size 0 --data.dir data_out/kjv
  --train.out_dir "$out/runs" --train.overwrite true --train.max_steps "$steps"
  --train.threads "$threads" --train.eval_interval 0 --train.eval_windows 8
  --train.log_interval 1000 --ckpt.interval 0)

run() {  # GROUP LABEL NAME FLAGS...
  local group="$1" label="$2" name="$3"
  shift 3
  echo "exp_memory: run $name: $*"
  "$bin" train "${common[@]}" --train.name "$name" "$@" >"$out/runs/$name.log" 2>&1 || {
    echo "exp_memory: error: run $name failed; last lines of $out/runs/$name.log:" >&2
    tail -5 "$out/runs/$name.log" >&2
    exit 1
  }
  printf '%s\t%s\t%s\n' "$group" "$label" "$out/runs/$name" >>"$manifest"
}

for opt in sgd adamw lamb lars adafactor adamw8bit; do
  run optimizer "$opt" "opt_$opt" --optim.name "$opt"
done
run precision "fp32 params" prec_fp32 --optim.name adamw --precision.params fp32
run precision "bf16 params + fp32 master" prec_bf16 --optim.name adamw --precision.params bf16 \
  --precision.grads bf16 --precision.master fp32
run precision "bf16 params + fp32 master, matmul bf16" prec_bf16_mm --optim.name adamw \
  --precision.params bf16 --precision.grads bf16 --precision.master fp32 --precision.matmul bf16
for rc in none mlp block; do
  run recompute "$rc" "rc_$rc" --optim.name adamw --model.recompute "$rc"
done
for mb in 1 2 4 8; do
  run micro_batch "B=$mb x A=$((8 / mb))" "mb_$mb" --optim.name adamw --train.micro_batch "$mb" \
    --train.accum $((8 / mb))
done

/usr/bin/python3 scripts/exp/plot_memory.py --manifest "$manifest" --table "$out/table.md" \
  --png "$out/memory.png"
echo "exp_memory: wrote $out/table.md and $out/memory.png"
cat "$out/table.md"
