#!/usr/bin/env bash
# Experiment: the six optimizers, and AdamW with bf16 state (adamw_bf16: m and v stored in bf16),
# on a small GPT and the default KJV corpus (global batch 16 sequences, one process), under a
# fixed budget of two kinds: the same tokens, and the same wall-clock seconds.
#   1. Calibration: a short run of each optimizer, just before its wall-clock runs of 3b, measures
#      its tokens/s on this machine (tokens per step over the lower quartile of its step times
#      after its first 5 steps: allocation and page faults are not the pace, and a passing slow
#      stretch of the machine does not set the budget); the asked wall-clock budget
#      (EXP_SECONDS of training per run) becomes a token budget per optimizer: whole steps,
#      seconds x tokens/s. Those runs then stop on tokens, so seeds of one optimizer see the same
#      data and a busy moment of the machine does not cut a run short, while a faster optimizer
#      still gets more tokens, as a wall-clock budget gives it.
#   2. LR sweep: three LRs per optimizer (a factor ~3 apart, around its usual values) under one
#      token budget (EXP_TOKENS, the same for every optimizer), first seed; the lowest final val
#      loss picks the LR.
#   3. Final, (a) the same token budget: each optimizer at its LR on the sweep's tokens, every
#      seed of EXP_SEEDS (the first seed's run is the sweep's run at that LR: the same
#      configuration, not run twice); (b) the same wall-clock budget: each at its LR on its
#      calibrated token budget, every seed. Each is ranked by the mean final val loss, a winner
#      named only where the gap exceeds the seed spread.
# Same model, data order, schedule (cosine, 5% warmup, floor 0.1), clipping (1.0) and weight decay
# (0.1; Adafactor 0: its decay is scaled by its relative step, as in its paper) for all. Adafactor
# runs with the schedule's LR (relative_step false), on the scale of each tensor's RMS.
#
# Usage: scripts/exp/exp_optimizers.sh [--size smoke|default|small|medium]
# Writes EXP_OUT/REPORT.md (calibration, sweep, the two final rankings) and PNGs; environment in
# scripts/exp/exp_lib.sh, plus EXP_TOKENS (the token budget of the sweep and of (a)) and EXP_SECONDS
# (the training seconds of (b)). Default size: 49 runs, about 10 minutes on 2 idle cores of an
# AMD EPYC, Zen 4 (21 sweep runs and 7 second-seed runs of 163840 tokens at ~17k tokens/s, 14
# runs of 15 s, calibration, start-up and evaluations; the report records the time taken and the
# load average). small and medium (bigger models, more tokens) take hours on 2 cores and were not
# timed.
exp_name=optimizers
source "$(dirname "${BASH_SOURCE[0]}")/exp_lib.sh"

case $size in
  smoke)
    model=(--model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32)
    seq=32 micro=8 budget=3072 seconds=0.5 calib_steps=12 eval_windows=8 ;;
  default)
    model=(--model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 64)
    seq=64 micro=16 budget=163840 seconds=15 calib_steps=30 eval_windows=64 ;;
  small)
    model=(--model.n_layer 6 --model.n_head 6 --model.n_embd 192 --model.block_size 128)
    seq=128 micro=16 budget=1048576 seconds=150 calib_steps=30 eval_windows=64 ;;
  medium)
    model=(--model.n_layer 8 --model.n_head 8 --model.n_embd 256 --model.block_size 128)
    seq=128 micro=32 budget=4194304 seconds=600 calib_steps=30 eval_windows=64 ;;
esac
budget=${EXP_TOKENS:-$budget} seconds=${EXP_SECONDS:-$seconds}
# LR grids, centred where 100-step trials of this model put each optimizer's best (Adafactor's LR
# multiplies each tensor's RMS, LARS's its trust ratio eta = 0.001).
declare -A grid=([sgd]="0.03 0.1 0.3" [adamw]="1.5e-3 3e-3 6e-3" [lamb]="1e-2 3e-2 1e-1"
  [lars]="3 10 30" [adafactor]="0.03 0.1 0.3" [adamw8bit]="1.5e-3 3e-3 6e-3"
  [adamw_bf16]="1.5e-3 3e-3 6e-3")
optimizers=(sgd adamw lamb lars adafactor adamw8bit adamw_bf16)
common=("${model[@]}" --train.seq_len "$seq" --train.eval_windows "$eval_windows"
  --train.log_interval 1000 --optim.schedule cosine --optim.min_lr_ratio 0.1
  --optim.grad_clip 1.0 --model.dropout 0.0)
tokens_per_step=$((micro * seq))

exp_param model "${model[*]}"
exp_param seq "$seq"
exp_param micro "$micro"
exp_param budget "$budget"
exp_param seconds "$seconds"
exp_param calib_steps "$calib_steps"
exp_param common "${common[*]}"

# The optimizer of a configuration, and its own settings besides its LR.
optim_of() {
  case $1 in
    adamw_bf16) echo adamw ;;
    *) echo "$1" ;;
  esac
}
recipe() {
  case $1 in
    adafactor) echo --optim.weight_decay 0 --optim.adafactor_relative_step false ;;
    adamw_bf16) echo --optim.weight_decay 0.1 --precision.state bf16 ;;
    *) echo --optim.weight_decay 0.1 ;;
  esac
}

# schedule TOKENS: a token budget of whole steps, with its warmup (5%) and 8 evaluations.
schedule() {
  local steps=$(($1 / tokens_per_step))
  ((steps > 0)) || steps=1
  echo --train.max_tokens $((steps * tokens_per_step)) --optim.warmup_steps $(((steps + 19) / 20)) \
    --train.eval_interval $(((steps + 7) / 8))
}

# tokens SECONDS OPTIM: the calibrated token budget of SECONDS of training.
tokens() {
  "$py" -c "print(int($1 * $("$py" scripts/exp/exp_report.py tokens-per-s "$out/runs/calib_$2")))"
}

s0=${seeds[0]}
for opt in "${optimizers[@]}"; do
  for lr in ${grid[$opt]}; do
    # shellcheck disable=SC2046
    EXP_MAY_DIVERGE=1 exp_run "sweep_${opt}_lr$lr" sweep "$opt" "$s0" 1 "$micro" 1 "$(optim_of "$opt")" "$lr" "${common[@]}" \
      $(recipe "$opt") $(schedule "$budget")
  done
done

for opt in "${optimizers[@]}"; do
  best=$(for lr in ${grid[$opt]}; do
    [[ -f "$out/runs/sweep_${opt}_lr$lr/summary.json" ]] || continue  # diverged
    echo "$(exp_summary "sweep_${opt}_lr$lr" final_val_loss) $lr"
  done | sort -g | head -1 | cut -d' ' -f2)
  [[ -n "$best" ]] || exp_fail "every LR of $opt diverged: ${grid[$opt]}"
  exp_param "best_$opt" "$best"
  # (a) the sweep's token budget: the first seed is the sweep's run at this LR.
  for seed in "${seeds[@]:1}"; do
    # shellcheck disable=SC2046
    exp_run "tok_${opt}_s$seed" final_tokens "$opt" "$seed" 1 "$micro" 1 "$(optim_of "$opt")" "$best" "${common[@]}" \
      $(recipe "$opt") $(schedule "$budget")
  done
  # (b) the wall-clock budget, as this optimizer's calibrated tokens. The calibration runs right
  # before the runs it budgets, so that it measures the pace they run at (a machine's pace drifts
  # over the minutes of the sweep).
  read -r -a lrs <<<"${grid[$opt]}"
  # shellcheck disable=SC2046
  exp_run "calib_$opt" calibration "$opt" "$s0" 1 "$micro" 1 "$(optim_of "$opt")" "${lrs[1]}" "${common[@]}" \
    $(recipe "$opt") --train.max_steps "$calib_steps" --optim.warmup_steps 1 --train.eval_interval 0
  exp_param "tokens_$opt" "$(tokens "$seconds" "$opt")"
  for seed in "${seeds[@]}"; do
    # shellcheck disable=SC2046
    exp_run "wall_${opt}_s$seed" final_wall "$opt" "$seed" 1 "$micro" 1 "$(optim_of "$opt")" "$best" "${common[@]}" \
      $(recipe "$opt") $(schedule "$(tokens "$seconds" "$opt")")
  done
done

exp_report "EXP_SEEDS=\"${seeds[*]}\" EXP_TOKENS=$budget EXP_SECONDS=$seconds scripts/exp/exp_optimizers.sh --size $size"
