#!/usr/bin/env bash
# Experiment: the global batch, in three parts, on a small GPT and the default KJV corpus.
#   A. Equivalence: one global batch of 8 sequences split as world x micro-batch x accumulation
#      = 1x8x1 (the reference), 1x4x2, 1x2x4, 1x1x8, and under mpirun 2x2x2 and 4x1x2, with
#      dropout on (0.1). Same windows, same dropout masks (keyed by each sequence's global
#      index), so the curves should agree up to summation order: their deviation from the
#      reference is set against the spread between seeds of the reference (the size of a
#      difference that matters), measured with at least 3 seeds (EXP_SEEDS, topped up with the
#      next seeds when it names fewer); the tolerance is a tenth of that spread.
#   B. Scaling: global batches of 8, 16, 32, 64 and 128 sequences, each trained on the same
#      number of tokens (so fewer, larger steps as G grows), under two LR rules from one base LR
#      (scale_lr at G = 8): `linear`, the linear scaling rule with warmup (peak LR x G/8, the
#      LR warming up linearly over the first 10% of the steps, i.e. of the tokens), and `fixed`
#      (the base LR at every G, no warmup). Val loss against tokens and against wall-clock.
#   C. Large batch: AdamW, LAMB and LARS at growing global batches, up to 1024 sequences at the
#      default size through accumulation, each with the linear scaling rule + warmup (10%) from
#      its base LR at the smallest batch of the ladder, on one token budget. To get to 1024
#      sequences within the default's time, part C trains a smaller GPT on shorter sequences
#      than parts A and B (the report says which); --size medium runs the 4-layer model of the
#      default's parts A and B there, up to 2048 sequences.
# Every configuration runs with each of EXP_SEEDS; B and C without dropout. The schedule (cosine
# to a floor of 0.1 of the peak) is set in steps, so it stretches with the steps a batch gets.
#
# Usage: scripts/exp/exp_global_batch.sh [--size smoke|default|small|medium]
# Writes EXP_OUT/REPORT.md (tables: deviation vs seed spread; loss, steps and tokens/s per batch
# and rule; the optimizers per large batch) and PNGs; see scripts/exp/exp_lib.sh for the environment
# (EXP_SIZE, EXP_OUT, EXP_SEEDS, EXP_THREADS, EXP_DATA, EXP_PUBLISH). Default size: 46 runs,
# about 5 minutes on 2 idle cores of an AMD EPYC (Zen 4); several times longer on cores shared
# with other work (the report records the time taken and the load average).
# small and medium (bigger models, more tokens) take hours on 2 cores and were not timed.
exp_name=global_batch
source "$(dirname "${BASH_SOURCE[0]}")/exp_lib.sh"
command -v mpirun >/dev/null || exp_fail "mpirun not found (scripts/setup.sh installs openmpi-bin)"

# Per size: parts A and B's model and sequence length; B's token budget; C's model, sequence,
# batches (sequences) and token budget.
case $size in
  smoke)
    model=(--model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32)
    seq=32 eq_steps=6 scale_tokens=8192 batches=(8 16 32) eval_windows=8
    large_model=(--model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 8)
    large_seq=8 large_tokens=4096 large_batches=(16 64 128) ;;
  default)
    model=(--model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 64)
    seq=64 eq_steps=120 scale_tokens=131072 batches=(8 16 32 64 128) eval_windows=64
    large_model=(--model.n_layer 2 --model.n_head 2 --model.n_embd 64 --model.block_size 16)
    large_seq=16 large_tokens=262144 large_batches=(64 256 1024) ;;
  small)
    model=(--model.n_layer 6 --model.n_head 6 --model.n_embd 192 --model.block_size 128)
    seq=128 eq_steps=200 scale_tokens=786432 batches=(8 16 32 64 128) eval_windows=64
    large_model=(--model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 32)
    large_seq=32 large_tokens=1572864 large_batches=(64 256 1024) ;;
  medium)
    model=(--model.n_layer 8 --model.n_head 8 --model.n_embd 256 --model.block_size 128)
    seq=128 eq_steps=300 scale_tokens=1572864 batches=(8 16 32 64 128) eval_windows=64
    large_model=(--model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 64)
    large_seq=64 large_tokens=3145728 large_batches=(64 256 1024 2048) ;;
esac
eq_lr=2e-3 scale_lr=1e-3 eq_dropout=0.1 max_micro=16 large_max_micro=64
# Part C's base LRs at the ladder's first batch: 200-step trials of the default's part-C model at
# G = 64 put AdamW's best at 2e-3 (over 4e-3), LAMB's at 3e-2 (over 1e-2 and 1e-1); LARS was flat
# from 3 to 100 (its trust ratio eta = 0.001 multiplies the LR): the middle of its usual grid.
declare -A large_lr=([adamw]=2e-3 [lamb]=3e-2 [lars]=10)
large_optims=(adamw lamb lars)
train_common=(--train.eval_windows "$eval_windows" --train.log_interval 1000
  --optim.weight_decay 0.1 --optim.schedule cosine --optim.min_lr_ratio 0.1 --optim.grad_clip 1.0)
common=("${model[@]}" --train.seq_len "$seq" "${train_common[@]}")
large_common=("${large_model[@]}" --train.seq_len "$large_seq" "${train_common[@]}")
# Part A's reference split: at least 3 seeds for its seed spread.
eq_seeds=("${seeds[@]}")
next_seed=$(printf '%s\n' "${seeds[@]}" | sort -n | tail -1)
while ((${#eq_seeds[@]} < 3)); do
  next_seed=$((next_seed + 1))
  eq_seeds+=("$next_seed")
done
g0=${batches[0]} large_g0=${large_batches[0]}

exp_param model "${model[*]}"
exp_param seq "$seq"
exp_param eq_steps "$eq_steps"
exp_param eq_lr "$eq_lr"
exp_param eq_dropout "$eq_dropout"
exp_param eq_seeds "${eq_seeds[*]}"
exp_param scale_tokens "$scale_tokens"
exp_param scale_lr "$scale_lr"
exp_param scale_g0 "$g0"
exp_param batches "${batches[*]}"
exp_param large_model "${large_model[*]}"
exp_param large_seq "$large_seq"
exp_param large_tokens "$large_tokens"
exp_param large_batches "${large_batches[*]}"
exp_param large_g0 "$large_g0"
exp_param large_lrs "adamw ${large_lr[adamw]} lamb ${large_lr[lamb]} lars ${large_lr[lars]}"
exp_param seeds "${seeds[*]}"
exp_param common "${common[*]}"
exp_param large_common "${large_common[*]}"

# schedule STEPS WARMUP_PERCENT: the run's length, its warmup (a share of its steps, rounded up)
# and evaluation cadence (8 evaluations).
schedule() {
  local steps=$1
  echo --train.max_steps "$steps" --optim.warmup_steps $(((steps * $2 + 99) / 100)) \
    --train.eval_interval $(((steps + 7) / 8))
}
lr_times() { "$py" -c "print('%.4g' % ($1 * $2 / $3))"; }

# A. one global batch of 8, split six ways, dropout on; the reference split at every seed.
eq="$(schedule "$eq_steps" 5) --model.dropout $eq_dropout"
for seed in "${eq_seeds[@]}"; do
  # shellcheck disable=SC2086
  exp_run "eq_1x8x1_s$seed" equivalence "1x8x1" "$seed" 1 8 1 adamw "$eq_lr" "${common[@]}" $eq
done
s0=${seeds[0]}
for split in 1x4x2 1x2x4 1x1x8 2x2x2 4x1x2; do
  IFS=x read -r w m a <<<"$split"
  # shellcheck disable=SC2086
  exp_run "eq_${split}_s$s0" equivalence "$split" "$s0" "$w" "$m" "$a" adamw "$eq_lr" \
    "${common[@]}" $eq
done

# B. the same tokens at every global batch G (micro-batch up to max_micro, then accumulation),
# under each LR rule.
for rule in fixed linear; do
  for g in "${batches[@]}"; do
    micro=$((g < max_micro ? g : max_micro))
    steps=$((scale_tokens / (g * seq)))
    if [[ $rule == linear ]]; then
      lr=$(lr_times "$scale_lr" "$g" "$g0") sched="$(schedule "$steps" 10)"
    else
      lr=$(lr_times "$scale_lr" 1 1) sched="$(schedule "$steps" 0)"
    fi
    for seed in "${seeds[@]}"; do
      # shellcheck disable=SC2086
      EXP_MAY_DIVERGE=1 exp_run "scale_${rule}_g${g}_s$seed" scaling "$rule G=$g" "$seed" 1 \
        "$micro" $((g / micro)) adamw "$lr" "${common[@]}" $sched --model.dropout 0
    done
  done
done

# C. AdamW, LAMB and LARS at growing global batches, linear scaling + warmup, same tokens.
for g in "${large_batches[@]}"; do
  micro=$((g < large_max_micro ? g : large_max_micro))
  sched="$(schedule $((large_tokens / (g * large_seq))) 10)"
  for optim in "${large_optims[@]}"; do
    lr=$(lr_times "${large_lr[$optim]}" "$g" "$large_g0")
    for seed in "${seeds[@]}"; do
      # shellcheck disable=SC2086
      EXP_MAY_DIVERGE=1 exp_run "large_${optim}_g${g}_s$seed" large_batch "$optim G=$g" "$seed" \
        1 "$micro" $((g / micro)) "$optim" "$lr" "${large_common[@]}" $sched --model.dropout 0
    done
  done
done

exp_report "EXP_SEEDS=\"${seeds[*]}\" scripts/exp/exp_global_batch.sh --size $size"
