#!/usr/bin/env bash
# Full fine-tuning against train.freeze and LoRA at one model shape: the ledger's prediction and
# measurement per run (trained parameters, model state, the tracked peak, the process's RSS high
# water mark) and the step time, from a few training steps of each on the KJV corpus.
#
#   scripts/exp/exp_finetune_memory.sh [OUT_DIR]   (default runs_finetune_memory)
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), EXP_DATA (default data_out/kjv),
# EXP_SHAPE (default gpt2: GPT-2 124M's L12 H12 C768; demo: configs/demo.toml's L4 H4 C192),
# EXP_STEPS (default 6), EXP_MICRO (default 4 sequences of EXP_SEQ = 256 tokens). The weights
# start from the seed (the ledger and the step time do not depend on their values). Writes
# OUT_DIR/REPORT.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start exp_finetune_memory
out="${1:-runs_finetune_memory}"
data="${EXP_DATA:-data_out/kjv}"
steps="${EXP_STEPS:-6}"
micro="${EXP_MICRO:-4}"
seq="${EXP_SEQ:-256}"
need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_file "$data/meta.json" "prepare it: scripts/prepare_default.sh"
case "${EXP_SHAPE:-gpt2}" in
  gpt2) shape="--model.n_layer 12 --model.n_head 12 --model.n_embd 768 --model.block_size 1024" ;;
  demo) shape="--model.n_layer 4 --model.n_head 4 --model.n_embd 192 --model.block_size 128" ;;
  *) die "EXP_SHAPE must be gpt2 or demo" ;;
esac
mkdir -p "$out"

declare -A modes=(
  [full]=""
  [freeze_bottom_half]="--train.freeze embed.*,block.[0-5].*"
  [lora_r8_qkv]="--lora.rank 8 --lora.targets qkv"
  [lora_r8_all]="--lora.rank 8 --lora.targets qkv,attn_proj,mlp_fc,mlp_proj"
  [lora_r8_qkv_bf16]="--lora.rank 8 --lora.targets qkv --precision.params bf16"
)
[[ "${EXP_SHAPE:-gpt2}" == demo ]] && modes[freeze_bottom_half]="--train.freeze embed.*,block.[0-1].*"

report="$out/REPORT.md"
{
  echo "# Fine-tuning memory and step time"
  echo
  echo "Shape: \`$shape\`, micro-batch $micro x $seq tokens, AdamW, $steps steps, data $data."
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores."
  echo
  echo "| mode | trained params | frozen params | model state MB (pred) | tracked peak MB (pred / meas) | VmHWM MB | step ms (median) |"
  echo "|---|---|---|---|---|---|---|"
} > "$report"
for mode in full freeze_bottom_half lora_r8_qkv lora_r8_all lora_r8_qkv_bf16; do
  log="$out/$mode.log"
  # shellcheck disable=SC2086
  "$bin" train --data.dir "$data" --train.out_dir "$out" --train.name "$mode" --train.overwrite true \
    $shape --train.micro_batch "$micro" --train.seq_len "$seq" --train.max_steps "$steps" \
    --train.eval_interval 0 --train.eval_windows 1 --train.log_interval 1 --optim.name adamw \
    --train.tensorboard false ${modes[$mode]} > "$log" 2>&1
  python3 - "$log" "$out/$mode/metrics.jsonl" "$mode" >> "$report" <<'EOF'
import json, re, statistics, sys
log, metrics, mode = sys.argv[1:]
text = open(log).read()
# The ledger prints MB, or GB (1e9 bytes) once the model state or the peak passes 1 GB.
mb = 1000.0 if "(GB = 1e9 bytes)" in text else 1.0
n = re.search(r"N = (\d+) params", text).group(1)
frozen = re.search(r"trained N = \d+ of (\d+)", text)
frozen = str(int(frozen.group(1)) - int(n)) if frozen else "0"
state = float(re.search(r"^model state\s+\S+\s+(\S+)", text, re.M).group(1)) * mb
# The end-of-run table (MB): current, peak, predicted, error.
meas = re.search(r"^total \(peak\)\s+\S+\s+(\S+)\s+(\S+)", text, re.M)
hwm = re.search(r"VmHWM ([\d.]+) MB", text).group(1)
steps = [json.loads(l) for l in open(metrics) if '"step_ms"' in l]
ms = statistics.median(s["step_ms"] for s in steps[1:]) if len(steps) > 1 else float("nan")
print(f"| {mode} | {int(n):,} | {int(frozen):,} | {state:.1f} | {float(meas.group(2)):.1f} / {float(meas.group(1)):.1f} | {float(hwm):.1f} | {ms:.0f} |")
EOF
  echo "exp_finetune_memory: $mode done"
done
echo "exp_finetune_memory: wrote $report"
cat "$report"
