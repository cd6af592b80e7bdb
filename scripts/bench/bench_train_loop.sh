#!/usr/bin/env bash
# What the training loop costs around the step: `ledgerlm train`'s end-to-end tokens/s (wall
# clock of the loop, evaluations excluded: data loading, metrics, progress lines and the final
# checkpoint included) against `ledgerlm bench` (the same train_step on random tokens) on the
# same shape, alternating within each repetition.
#
# usage: scripts/bench/bench_train_loop.sh [--build DIR] [--reps N] [--steps N] [CONFIG.toml ...]
#   default configs: configs/bench_tiny.toml configs/bench_small.toml; default build: build;
#   --steps: train's optimizer steps per run (default 60; bench times 20 after 3 of warm-up).
#
# The train runs read byte tokens of the default corpus (data_out/kjv.txt, made by
# scripts/prepare_default.sh), so both sides run vocab 257 (256 bytes and the end-of-text token)
# whatever the config says. bench times its steps through its per-op profiler (two clock reads
# per backend call), train does not. train runs with its defaults for logging (metrics.jsonl
# every step, a progress line per log_interval), one evaluation at the end (excluded from its end-to-end figure, which the run's summary.json
# records as e2e_tokens_per_s) and its final checkpoint. Each figure is a run's own: bench's
# median step, train's steps over its loop's wall clock; the table gives median, min and max
# over the repetitions and the ratio of the medians.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_train_loop

build=build
reps=3
steps=60
parse_options 2,18 build reps steps -- "$@"
configs=("${positional[@]}")
[[ ${#configs[@]} -gt 0 ]] || configs=(configs/bench_tiny.toml configs/bench_small.toml)
bin="$build/ledgerlm"
need_exec "$bin" "build the ledgerlm target, or pass --build DIR"
text=data_out/kjv.txt
need_file "$text" "run scripts/prepare_default.sh"

work=$(mktemp -d /tmp/ledgerlm_bench_loop.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" prepare --input "$text" --out "$work/bytes" --tokenizer bytes >/dev/null

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | $(nproc) cores"
results="$work/results.tsv"
for config in "${configs[@]}"; do
  shape=(--config "$config" --model.vocab_size 257)
  for ((rep = 1; rep <= reps; rep++)); do
    bench_tps=$("$bin" bench "${shape[@]}" --steps 20 --warmup 3 |
      sed -n 's/^bench_json //p' | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
    "$bin" train "${shape[@]}" --data.dir "$work/bytes" --train.out_dir "$work/runs" \
      --train.name loop --train.overwrite true --train.max_steps "$steps" --train.max_tokens 0 \
      --train.max_seconds 0 --train.eval_interval 0 --train.eval_windows 8 >/dev/null
    train_tps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["e2e_tokens_per_s"])' \
      "$work/runs/loop/summary.json")
    printf '%s\t%s\t%s\n' "$config" "$bench_tps" "$train_tps" >>"$results"
    printf 'bench_train_loop: %s rep %d: bench %.0f tok/s, train %.0f tok/s (load %s)\n' "$config" \
      "$rep" "$bench_tps" "$train_tps" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done

/usr/bin/python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    config, bench, train = line.rstrip("\n").split("\t")
    rows.setdefault(config, ([], []))
    rows[config][0].append(float(bench))
    rows[config][1].append(float(train))
fmt = lambda v: f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})"
print("\n| shape (vocab 257) | bench tok/s median (min-max) | train e2e tok/s median (min-max) | train / bench |")
print("|---|---:|---:|---:|")
for config, (bench, train) in rows.items():
    ratio = statistics.median(train) / statistics.median(bench)
    print(f"| {config} | {fmt(bench)} | {fmt(train)} | {ratio:.3f} |")
EOF
