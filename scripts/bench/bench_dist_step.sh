#!/usr/bin/env bash
# Step time of data-parallel training under mpirun for one or two ledgerlm binaries, alternating
# within each repetition (in turn A first, B first): what a change to the collectives (the timeout gate before each one,
# train/comm/comm_mpi_gate.h) costs per step, and whether it changed a single bit of the losses.
#
# usage: scripts/bench/bench_dist_step.sh [--reps N] [--steps N] [--world N] [--stages "0 1 2 3"]
#                                         [--config FILE] BIN_A [BIN_B]
#   defaults: 5 repetitions, 60 steps, world 2 (one thread per rank), stages 0 1 2 3,
#   configs/bench_tiny.toml (L4 C128 T64: short steps, where a fixed cost per collective shows most).
#
# Every run trains the config's shape on byte tokens of the default corpus (data_out/kjv.txt, made
# by scripts/prepare_default.sh) with micro-batch 12 / world (the same global batch at every
# world), logging every step, no evaluation, no checkpoint before the end. A run's figures are
# the median and the minimum of its step_ms over steps 6..N (the first steps warm caches and
# allocators; on a machine shared with other jobs the fastest step is the least disturbed); the
# tables give, per binary and stage, the median over the repetitions, min and max, and B's
# median over A's. The losses of every run of B are compared with A's bit for bit (same seed,
# data and world: they must be equal unless the arithmetic changed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_dist_step

reps=5
steps=60
world=2
stages="0 1 2 3"
config=configs/bench_tiny.toml
parse_options 2,18 reps steps world stages config -- "$@"
bins=("${positional[@]}")
[[ ${#bins[@]} -ge 1 && ${#bins[@]} -le 2 ]] || { sed -n '2,18p' "$0" >&2; exit 2; }
for bin in "${bins[@]}"; do
  need_exec "$bin" "build the ledgerlm target"
done
need_command mpirun "scripts/setup.sh installs openmpi-bin"
text=data_out/kjv.txt
need_file "$text" "run scripts/prepare_default.sh"

work=$(mktemp -d /tmp/ledgerlm_bench_dist.XXXXXX)
trap 'rm -rf "$work"' EXIT
"${bins[0]}" prepare --input "$text" --out "$work/bytes" --tokenizer bytes >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np "$world" -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE
  -x OPENBLAS_NUM_THREADS=1)

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | $(nproc) cores | world $world | $config | $steps steps x $reps reps"
results="$work/results.tsv"
for ((rep = 1; rep <= reps; rep++)); do
  # B runs first in every other repetition, so that an order effect (the second of two runs
  # in a row measured ~1% slower) falls on both alike.
  order=("${!bins[@]}")
  ((rep % 2 == 0 && ${#bins[@]} == 2)) && order=(1 0)
  for stage in $stages; do
    for i in "${order[@]}"; do
      name="b${i}_z${stage}_r${rep}"
      "${mpi[@]}" "${bins[$i]}" train --config "$config" --model.vocab_size 257 \
        --data.dir "$work/bytes" --train.out_dir "$work/runs" --train.name "$name" \
        --train.max_steps "$steps" --train.max_tokens 0 --train.max_seconds 0 \
        --train.micro_batch $((12 / world)) --train.threads 1 --train.eval_interval 0 \
        --train.eval_windows 4 --train.log_interval 1000 --dist.zero "$stage" >"$work/$name.log" 2>&1 ||
        { tail -5 "$work/$name.log" >&2; die "run $name failed (its last lines above)"; }
      python3 - "$work/runs/$name/metrics.jsonl" "$i" "$stage" "$rep" >>"$results" <<'EOF'
import json, statistics, sys
steps, losses = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "step_ms" in r:
        losses.append(r["loss"])
        if r["step"] >= 6:
            steps.append(r["step_ms"])
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], repr(statistics.median(steps)),
                 repr(min(steps)), json.dumps(losses)]))
EOF
    done
  done
  echo "bench_dist_step: repetition $rep done (load $(cut -d' ' -f1 /proc/loadavg))"
done

python3 - "$results" "${bins[@]}" <<'EOF'
import json, statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
bins = sys.argv[2:]
for i, b in enumerate(bins):
    print(f"{'AB'[i]}: {b}")
med, fast, losses, by_rep = {}, {}, {}, {}
for b, stage, rep, median, minimum, loss in rows:
    med.setdefault((b, stage), []).append(float(median))
    fast.setdefault((b, stage), []).append(float(minimum))
    losses[(b, stage, rep)] = json.loads(loss)
    by_rep[(b, stage, rep)] = float(median)
def cell(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
for title, table in (("median step of a run", med), ("fastest step of a run", fast)):
    print(f"\n{title}, ms: median over the repetitions (min-max)")
    head = "| stage | A |" + (" B | B / A | paired B / A | losses |" if len(bins) == 2 else "")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for stage in sorted({s for _, s in table}):
        a = table[("0", stage)]
        line = f"| {stage} | {cell(a)} |"
        if len(bins) == 2:
            b = table[("1", stage)]
            same = all(losses[("0", stage, r)] == losses[("1", stage, r)]
                       for (_, s, r) in losses if s == stage and ("1", stage, r) in losses)
            # Each repetition runs A and B back to back: the median of the ratios of their median
            # steps is the figure least moved by other jobs coming and going.
            pairs = [by_rep[("1", stage, r)] / by_rep[("0", stage, r)]
                     for (bb, s, r) in by_rep if bb == "0" and s == stage and ("1", s, r) in by_rep]
            paired = f"{statistics.median(pairs):.4f}" if table is med else "-"
            line += (f" {cell(b)} | {statistics.median(b) / statistics.median(a):.4f} |"
                     f" {paired} | {'bitwise equal' if same else 'DIFFERENT'} |")
        print(line)
EOF
