#!/usr/bin/env bash
# Experiment: ZeRO stages 0-3 on the "small" shape (configs/bench_small.toml: L6 H6 C384, T256)
# on the default KJV corpus, one global batch of 8 sequences:
#   - 1 rank x 2 threads (micro-batch 8), the reference;
#   - 2 ranks x 1 thread (micro-batch 4) and 4 ranks x 1 thread (micro-batch 2, the 2 cores
#     oversubscribed) at stages 0, 1, 2, 3, under mpirun;
#   - PyTorch DDP (gloo, Debian's torch) on 2 and 4 processes with the same shapes, as the peer.
# Writes results/zero/REPORT.md (per-rank bytes by component, measured next to the planner's
# prediction; tokens/s, step time, the communication share of the step; the ratio of
# 2 ranks x 1 thread to 1 rank x 2 threads per stage) and results/zero/zero.png.
#
# The runs themselves (checkpoints, weights) go to EXP_RUNS; results/zero/runs/ keeps only each
# run's log, metrics.jsonl, config.toml and ledger.json, the record the report is built from.
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), EXP_STEPS (default 8), EXP_OUT (default
# results/zero), EXP_RUNS (default runs/exp_zero), EXP_TORCH (default 1: run the PyTorch DDP
# peer).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start exp_zero
steps="${EXP_STEPS:-8}"
out="${EXP_OUT:-results/zero}"
work="${EXP_RUNS:-runs/exp_zero}"
torch="${EXP_TORCH:-1}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_command mpirun "scripts/setup.sh installs openmpi-bin"
need_default_corpus
mkdir -p "$work"
manifest="$out/manifest.tsv"
: >"$manifest"

common=(--config configs/bench_small.toml --model.vocab_size 0 --data.dir data_out/kjv
  --train.out_dir "$work" --train.overwrite true --train.max_steps "$steps"
  --train.eval_interval 0 --train.eval_windows 8 --train.log_interval 1 --optim.name adamw)
mpi=(mpirun --allow-run-as-root --oversubscribe -x OMP_WAIT_POLICY=PASSIVE -x OPENBLAS_NUM_THREADS=1)

run() {  # run NAME WORLD THREADS STAGE
  local name=$1 world=$2 threads=$3 stage=$4 micro=$((8 / $2))
  echo "exp_zero: $name (world $world x $threads threads, ZeRO $stage, micro-batch $micro)"
  local args=("${common[@]}" --train.name "$name" --train.threads "$threads"
    --train.micro_batch "$micro" --dist.zero "$stage")
  if ((world == 1)); then
    "$bin" train "${args[@]}" >"$work/$name.log" 2>&1
  else
    "${mpi[@]}" -np "$world" -x OMP_NUM_THREADS="$threads" "$bin" train "${args[@]}" \
      >"$work/$name.log" 2>&1
  fi
  printf '%s\t%s\t%s\t%s\tledgerlm\n' "$name" "$world" "$threads" "$stage" >>"$manifest"
}

run w1_t2 1 2 0
for world in 2 4; do
  for stage in 0 1 2 3; do run "w${world}_z${stage}" "$world" 1 "$stage"; done
done

if [[ "$torch" == 1 ]]; then
  vocab=$(/usr/bin/python3 -c 'import json;print(json.load(open("data_out/kjv/meta.json"))["vocab_size"])')
  for world in 2 4; do
    name="torch_ddp_w${world}"
    echo "exp_zero: $name (PyTorch DDP, gloo, $world processes x 1 thread)"
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
      /usr/bin/python3 scripts/exp/ddp_torch_step.py --world "$world" --layers 6 --heads 6 --embd 384 --seq 256 \
      --batch $((8 / world)) --vocab "$vocab" --steps "$steps" \
      --out "$work/$name.json" >"$work/$name.log" 2>&1
    printf '%s\t%s\t1\t-\ttorch\n' "$name" "$world" >>"$manifest"
  done
fi

/usr/bin/python3 scripts/exp/zero_report.py --manifest "$manifest" --runs "$work" --out "$out" \
  --command "scripts/exp/exp_zero.sh (EXP_STEPS=$steps)"
# The record next to the report: logs and each run's small files, never weights or checkpoints.
rm -rf "$out/runs"
mkdir -p "$out/runs"
cp "$work"/*.log "$out/runs/"
cp "$work"/*.json "$out/runs/" 2>/dev/null || true
while IFS=$'\t' read -r name _; do
  [[ -d "$work/$name" ]] || continue
  mkdir -p "$out/runs/$name"
  for f in metrics.jsonl config.toml ledger.json; do
    [[ -f "$work/$name/$f" ]] && cp "$work/$name/$f" "$out/runs/$name/"
  done
done <"$manifest"
echo "exp_zero: wrote $out/REPORT.md and $out/zero.png"
