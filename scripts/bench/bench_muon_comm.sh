#!/usr/bin/env bash
# Muon's communication under ZeRO against AdamW's: the small benchmark shape
# (configs/bench_small.toml, L6 H6 C384, ~10.7M parameters) trained for a few steps under mpirun
# at world 2 and 4, ZeRO stages 1 and 3, on the prepared KJV data. Per run, medians over the
# steps after the first two: step ms, optimizer ms (the update on this rank, Newton-Schulz
# included), comm ms (every collective of the step: reduce-scatter, all-gather, and for Muon its
# two all-to-alls), and the bytes rank 0 sent in Muon's all-to-alls (exchange_bytes). AdamW's
# collectives move the same gradient and weight bytes as Muon's; the exchange is what Muon adds.
#
#   scripts/bench/bench_muon_comm.sh
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_STEPS (default 8), EXP_DATA (default
# data_out/kjv). Ranks share this machine's cores (one thread each): figures for the relative
# cost only; prints figures, never fails on timing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_muon_comm
need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_command mpirun "scripts/setup.sh installs openmpi-bin"
steps="${BENCH_STEPS:-8}"
data="${EXP_DATA:-data_out/kjv}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
printf "%-6s %-5s %-5s %10s %10s %10s %16s\n" optim world zero step_ms optim_ms comm_ms exchange_MB
for world in 2 4; do
  for zero in 1 3; do
    for optim in adamw muon; do
      name="${optim}_w${world}_z${zero}"
      lr=$([ "$optim" = muon ] && echo 0.02 || echo 6e-4)
      "${mpirun[@]}" -np "$world" "$bin" train --config configs/bench_small.toml --data.dir "$data" \
        --model.vocab_size 0 --train.out_dir "$out" --train.name "$name" --train.max_steps "$steps" \
        --train.max_seconds 0 --train.micro_batch $((16 / world)) --train.eval_interval 0 \
        --train.threads 1 --dist.zero "$zero" --optim.name "$optim" --optim.lr "$lr" \
        --train.overwrite true > "$out/$name.log" 2>&1 ||
        { tail -3 "$out/$name.log" >&2; die "$name failed (its last lines above)"; }
      /usr/bin/python3 - "$out/$name/metrics.jsonl" "$optim" "$world" "$zero" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l][2:]
med = lambda k: statistics.median(r.get(k, 0) for r in recs)
print(f"{sys.argv[2]:<6} {sys.argv[3]:<5} {sys.argv[4]:<5} {med('step_ms'):10.1f} {med('optim_ms'):10.1f} "
      f"{med('comm_ms'):10.1f} {med('exchange_bytes') / 1e6:16.2f}")
PY
    done
  done
done
