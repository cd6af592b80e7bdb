#!/usr/bin/env bash
# Optimizer-step time of sgd and adamw for each implementation (loop | foreach | fused), and of
# every other optimizer (fused: their only implementation; Schedule-Free with its constant
# schedule, Muon's Newton-Schulz included), on the "small" benchmark shape (configs/bench_small.toml: L6 H6 C384, ~10.7M parameters), from
# `ledgerlm bench`'s bench_json line (optimizer_ms: median over the timed steps of the whole
# optimizer step: grad-norm pass, update, write of the compute copy).
#
#   scripts/bench/bench_optim.sh [extra ledgerlm bench flags...]
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_STEPS (default 8), BENCH_WARMUP
# (default 2). Prints figures; never fails on timing.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_optim
steps="${BENCH_STEPS:-8}"
warmup="${BENCH_WARMUP:-2}"
need_exec "$bin" "build first, or set LEDGERLM_BIN"

rows=()
cases=(sgd/loop sgd/foreach sgd/fused adamw/loop adamw/foreach adamw/fused lamb/fused lars/fused
  adafactor/fused adamw8bit/fused lion/fused adamw_schedulefree/fused ademamix/fused muon/fused)
for case in "${cases[@]}"; do
  optim="${case%/*}" impl="${case#*/}"
  extra=()
  [[ "$optim" = adamw_schedulefree ]] && extra=(--optim.schedule constant)
  log="$(mktemp)"
  if ! "$bin" bench --config configs/bench_small.toml --optim.name "$optim" --optim.impl "$impl" \
      --steps "$steps" --warmup "$warmup" "${extra[@]}" "$@" >"$log" 2>&1; then
    echo "bench_optim: error: ledgerlm bench failed for $optim/$impl:" >&2
    tail -5 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  json="$(grep '^bench_json ' "$log" | tail -1 | cut -d' ' -f2-)"
  rm -f "$log"
  if [[ -z "$json" ]]; then
    echo "bench_optim: error: no bench_json line for $optim/$impl" >&2
    exit 1
  fi
  row="$(/usr/bin/python3 -c '
import json, sys
j = json.loads(sys.argv[1])
print("%.2f %.1f %d" % (j["optimizer_ms"], j["step_ms"], j["params"]))' "$json")"
  read -r opt_ms step_ms params <<<"$row"
  rows+=("$optim $impl $opt_ms $step_ms $params")
  echo "bench_optim: $optim/$impl optimizer ${opt_ms} ms (step ${step_ms} ms)" >&2
done

echo
echo "Optimizer step, configs/bench_small.toml, median of $steps steps after $warmup warm-up:"
echo
printf '| %-18s | %-7s | %12s | %9s | %8s | %8s |\n' optimizer impl "optimizer_ms" "step_ms" "share" "ns/param"
printf '|%s|%s|%s|%s|%s|%s|\n' "--------------------" "---------" "-------------:" "----------:" "---------:" "---------:"
for r in "${rows[@]}"; do
  read -r optim impl opt_ms step_ms params <<<"$r"
  ns="$(awk -v ms="$opt_ms" -v n="$params" 'BEGIN { printf "%.2f", ms * 1e6 / n }')"
  share="$(awk -v o="$opt_ms" -v s="$step_ms" 'BEGIN { printf "%.1f%%", 100 * o / s }')"
  printf '| %-18s | %-7s | %12s | %9s | %8s | %8s |\n' "$optim" "$impl" "$opt_ms" "$step_ms" "$share" "$ns"
done
