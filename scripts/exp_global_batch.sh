#!/usr/bin/env bash
# Experiment: the global batch, in three parts, on a small GPT and the default KJV corpus.
#   A. Equivalence: one global batch of 8 sequences split as world x micro-batch x accumulation
#      = 1x8x1 (the reference), 1x4x2, 1x2x4, 1x1x8, and under mpirun 2x2x2 and 4x1x2, with
#      dropout on (0.1). Same windows, same dropout masks (keyed by each sequence's global
#      index), so the curves should agree up to summation order: their deviation from the
#      reference is set against the spread between seeds of the reference (the size of a
#      difference that matters), measured with at least 3 seeds (EXP_SEEDS, topped up with the
#      next seeds when it names fewer); the tolerance is a tenth of that spread.
#   B. Scaling: global batches of 4 .. 128 sequences trained on the same number of tokens with
#      the same peak LR: how the final val loss and the throughput change with the batch.
#   C. Large batch: at 8x the base batch, AdamW with the base LR, sqrt-scaled and linearly scaled
#      LR, and LAMB and LARS (layer-wise trust ratios, made for large batches) at sqrt-scaled LRs,
#      against the base batch on the same tokens.
# Every configuration runs with each of EXP_SEEDS; B and C without dropout. The schedule (cosine,
# 5% warmup, floor 0.1) is set in steps, so it stretches with the number of steps a batch size
# gets.
#
# Writes EXP_OUT/REPORT.md (tables: deviation vs seed spread; loss, steps and tokens/s per batch;
# the large-batch rules) and PNGs; see scripts/exp_lib.sh for the environment (EXP_SIZE, EXP_OUT,
# EXP_SEEDS, EXP_THREADS, EXP_DATA, EXP_PUBLISH). Default size: about 13 minutes on 2 idle cores
# (estimated from the model's ~12k tokens/s there; the report records the time taken).
exp_name=global_batch
source "$(dirname "${BASH_SOURCE[0]}")/exp_lib.sh"
command -v mpirun >/dev/null || exp_fail "mpirun not found (scripts/setup.sh installs openmpi-bin)"

if [[ "$size" == smoke ]]; then
  model=(--model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32)
  seq=32 eq_steps=6 scale_tokens=4096 batches=(4 8 16) base=4 large=16 eval_windows=8
else
  model=(--model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 64)
  seq=64 eq_steps=120 scale_tokens=393216 batches=(4 8 16 32 64 128) base=16 large=128
  eval_windows=64
fi
base_lr=2e-3 lamb_lr=1e-2 lars_lr=3.0 max_micro=16 eq_dropout=0.1
common=("${model[@]}" --train.seq_len "$seq" --train.eval_windows "$eval_windows"
  --train.log_interval 1000 --optim.weight_decay 0.1 --optim.schedule cosine
  --optim.min_lr_ratio 0.1 --optim.grad_clip 1.0)
# Part A's reference split: at least 3 seeds for its seed spread.
eq_seeds=("${seeds[@]}")
next_seed=$(printf '%s\n' "${seeds[@]}" | sort -n | tail -1)
while ((${#eq_seeds[@]} < 3)); do
  next_seed=$((next_seed + 1))
  eq_seeds+=("$next_seed")
done

exp_param model "${model[*]}"
exp_param seq "$seq"
exp_param eq_steps "$eq_steps"
exp_param scale_tokens "$scale_tokens"
exp_param base "$base"
exp_param large "$large"
exp_param base_lr "$base_lr"
exp_param lamb_lr "$lamb_lr"
exp_param lars_lr "$lars_lr"
exp_param eq_dropout "$eq_dropout"
exp_param eq_seeds "${eq_seeds[*]}"
exp_param seeds "${seeds[*]}"
exp_param common "${common[*]}"

# schedule STEPS: warmup (5%) and evaluation cadence (8 evaluations) for a run of STEPS steps.
schedule() {
  local steps=$1
  echo --train.max_steps "$steps" --optim.warmup_steps $(((steps + 19) / 20)) \
    --train.eval_interval $(((steps + 7) / 8))
}

# A. one global batch of 8, split six ways, dropout on; the reference split at every seed.
eq="$(schedule "$eq_steps") --model.dropout $eq_dropout"
for seed in "${eq_seeds[@]}"; do
  # shellcheck disable=SC2086
  exp_run "eq_1x8x1_s$seed" equivalence "1x8x1" "$seed" 1 8 1 adamw "$base_lr" "${common[@]}" $eq
done
s0=${seeds[0]}
for split in 1x4x2 1x2x4 1x1x8 2x2x2 4x1x2; do
  IFS=x read -r w m a <<<"$split"
  # shellcheck disable=SC2086
  exp_run "eq_${split}_s$s0" equivalence "$split" "$s0" "$w" "$m" "$a" adamw "$base_lr" \
    "${common[@]}" $eq
done

# B. the same tokens at every global batch G (micro-batch up to max_micro, then accumulation).
for g in "${batches[@]}"; do
  micro=$((g < max_micro ? g : max_micro))
  sched="$(schedule $((scale_tokens / (g * seq)))) --model.dropout 0"
  for seed in "${seeds[@]}"; do
    # shellcheck disable=SC2086
    exp_run "scale_g${g}_s$seed" scaling "G=$g" "$seed" 1 "$micro" $((g / micro)) adamw \
      "$base_lr" "${common[@]}" $sched
  done
done

# C. the large batch: LR rules for AdamW, and LAMB / LARS (base + sqrt(k) rule), same tokens.
k=$((large / base))
micro=$((large < max_micro ? large : max_micro))
sched="$(schedule $((scale_tokens / (large * seq)))) --model.dropout 0"
sqrt_k=$("$py" -c "import math; print(math.sqrt($k))")
lr_of() { "$py" -c "print('%.4g' % ($1 * $2))"; }
for rule in "adamw sqrt $(lr_of $base_lr "$sqrt_k")" "adamw linear $(lr_of $base_lr $k)" \
  "lamb sqrt $(lr_of $lamb_lr "$sqrt_k")" "lars sqrt $(lr_of $lars_lr "$sqrt_k")"; do
  read -r optim how lr <<<"$rule"
  for seed in "${seeds[@]}"; do
    # shellcheck disable=SC2086
    EXP_MAY_DIVERGE=1 exp_run "large_${optim}_${how}_s$seed" large_batch "$optim $how" "$seed" 1 "$micro" \
      $((large / micro)) "$optim" "$lr" "${common[@]}" $sched
  done
done

exp_report "EXP_SIZE=$size EXP_SEEDS=\"${seeds[*]}\" scripts/exp_global_batch.sh"
