#!/usr/bin/env bash
# What train.gns (the gradient noise scale, train/step/gns.h) costs per step: step time with it
# off and on, alternating within each repetition (in turn off first, on first), at
#   world 1 x accum 4 x micro 3 (small batches: micro-batches; a gradient-sized buffer and one
#                                pass over the gradients per micro-batch), 2 threads, and
#   world 2 x accum 1 x micro 6 under mpirun (small batches: the ranks' local gradients; one pass
#                                and a scalar all-reduce), one thread per rank;
# both a global batch of 12 sequences of the config's shape.
#
# usage: scripts/bench/bench_gns.sh [--build DIR] [--reps N] [--steps N] [--config FILE]
#   defaults: build, 5 repetitions, 40 steps, configs/bench_tiny.toml (short steps: where a pass
#   over the gradients weighs most).
#
# Runs train byte tokens of the default corpus (data_out/kjv.txt, scripts/prepare_default.sh), log
# every step, no evaluation. A run's figure is the median step_ms over steps 6..N; the table gives
# the median over the repetitions (min-max) and the median of the paired on / off ratios.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_gns

build=build
reps=5
steps=40
config=configs/bench_tiny.toml
parse_options 2,17 build reps steps config -- "$@"
[[ ${#positional[@]} -eq 0 ]] || die "unknown argument ${positional[0]}" 2
bin="$build/ledgerlm"
need_exec "$bin" "build the ledgerlm target, or pass --build DIR"
need_command mpirun "scripts/setup.sh installs openmpi-bin"
text=data_out/kjv.txt
need_file "$text" "run scripts/prepare_default.sh"

work=$(mktemp -d /tmp/ledgerlm_bench_gns.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" prepare --input "$text" --out "$work/bytes" --tokenizer bytes >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE
  -x OPENBLAS_NUM_THREADS=1)

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | $(nproc) cores | $config | $steps steps x $reps reps"
results="$work/results.tsv"
for ((rep = 1; rep <= reps; rep++)); do
  order=(false true)
  ((rep % 2 == 0)) && order=(true false)
  for setting in w1a4 w2a1; do
    for gns in "${order[@]}"; do
      name="${setting}_${gns}_r${rep}"
      common=(train --config "$config" --model.vocab_size 257 --data.dir "$work/bytes"
        --train.out_dir "$work/runs" --train.name "$name" --train.max_steps "$steps"
        --train.max_tokens 0 --train.max_seconds 0 --train.eval_interval 0 --train.eval_windows 4
        --train.log_interval 1000 --train.gns "$gns")
      if [[ $setting == w1a4 ]]; then
        cmd=("$bin" "${common[@]}" --train.micro_batch 3 --train.accum 4 --train.threads 2)
      else
        cmd=("${mpi[@]}" "$bin" "${common[@]}" --train.micro_batch 6 --train.accum 1 --train.threads 1)
      fi
      "${cmd[@]}" >"$work/$name.log" 2>&1 ||
        { tail -5 "$work/$name.log" >&2; die "run $name failed (its last lines above)"; }
      python3 - "$work/runs/$name/metrics.jsonl" "$setting" "$gns" "$rep" >>"$results" <<'PY'
import json, statistics, sys
steps = [json.loads(l)["step_ms"] for l in open(sys.argv[1])
         if "step_ms" in json.loads(l) and json.loads(l)["step"] >= 6]
print("\t".join(sys.argv[2:5] + [repr(statistics.median(steps))]))
PY
    done
  done
  echo "bench_gns: repetition $rep done (load $(cut -d' ' -f1 /proc/loadavg))"
done

python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    setting, gns, rep, ms = line.split("\t")
    runs[(setting, gns, rep)] = float(ms)
def cell(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
print("\nmedian step of a run, ms: median over the repetitions (min-max)")
print("| setting | gns off | gns on | paired on / off |")
print("|---|---|---|---|")
for setting in ("w1a4", "w2a1"):
    reps = sorted({r for (s, _, r) in runs if s == setting})
    off = [runs[(setting, "false", r)] for r in reps]
    on = [runs[(setting, "true", r)] for r in reps]
    ratio = statistics.median([b / a for a, b in zip(off, on)])
    print(f"| {setting} | {cell(off)} | {cell(on)} | {ratio:.4f} |")
PY
