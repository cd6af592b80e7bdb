#!/usr/bin/env bash
# A first look at the optimizers a 2026 comparison starts from — Lion, Schedule-Free AdamW,
# AdEMAMix and Muon — next to AdamW on the demo config (configs/demo.toml: L4 H4 C192, T128,
# 16 sequences per step, the KJV corpus), at equal tokens: each optimizer at three or four LRs (a
# factor ~2-3 apart around its usual scale, extended where the best sat at an edge), one seed, final val loss on 256 windows (32768 tokens),
# against the count unigram and bigram models of the same val split
# (scripts/exp/bigram_baseline.py). Not a study of record: one seed, one budget, every other
# hyper-parameter at its default (Lion's weight decay 1.0, ten times AdamW's, as its paper
# advises); the study engine's reports are the comparison to cite.
#
#   scripts/exp/exp_optimizers_first_look.sh [OUT_DIR]   (default runs_first_look)
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), EXP_TOKENS (default 819200 = 400 steps),
# EXP_DATA (default data_out/kjv). Writes OUT_DIR/REPORT.md and OUT_DIR/val_vs_lr.png. A run
# whose summary.json exists is not run again (extend a grid and rerun: only the new runs train).
# Speed is not reported here (scripts/bench/bench_optim.sh measures the optimizer step).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
bin="${LEDGERLM_BIN:-build/ledgerlm}"
out="${1:-runs_first_look}"
tokens="${EXP_TOKENS:-819200}"
data="${EXP_DATA:-data_out/kjv}"
[[ -x "$bin" ]] || { echo "exp_optimizers_first_look: error: $bin not found (build first)" >&2; exit 1; }
[[ -f "$data/meta.json" ]] || { echo "exp_optimizers_first_look: error: $data not prepared (scripts/prepare_default.sh)" >&2; exit 1; }
mkdir -p "$out"

declare -A grid=([adamw]="1e-3 2e-3 4e-3 8e-3" [lion]="1e-4 3e-4 1e-3 3e-3"
  [adamw_schedulefree]="2e-3 5e-3 1e-2" [ademamix]="1e-3 2e-3 4e-3" [muon]="5e-3 1e-2 2e-2 5e-2")
declare -A extra=([adamw]="" [lion]="--optim.weight_decay 1.0"
  [adamw_schedulefree]="--optim.schedule constant" [ademamix]=""
  [muon]="--optim.muon_adamw_lr 2e-3")
start=$(date +%s)
for optim in adamw lion adamw_schedulefree ademamix muon; do
  for lr in ${grid[$optim]}; do
    name="${optim}_lr${lr}"
    [[ -f "$out/$name/summary.json" ]] && continue
    # shellcheck disable=SC2086
    "$bin" train --config configs/demo.toml --data.dir "$data" --train.out_dir "$out" \
      --train.name "$name" --train.max_seconds 0 --train.max_tokens "$tokens" \
      --train.eval_interval 100 --train.eval_windows 256 --train.log_interval 1000 \
      --optim.name "$optim" --optim.lr "$lr" ${extra[$optim]} > "$out/$name.log" 2>&1 ||
      { echo "exp_optimizers_first_look: error: $name failed:" >&2; tail -3 "$out/$name.log" >&2; exit 1; }
    echo "$name: $(grep -o 'best val loss [0-9.]*' "$out/$name.log" | tail -1)"
  done
done
elapsed=$(( $(date +%s) - start ))
/usr/bin/python3 scripts/exp/bigram_baseline.py "$data" --json > "$out/baselines.json"
/usr/bin/python3 - "$out" "$tokens" "$elapsed" <<'PY'
import json, sys
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, tokens, elapsed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
base = json.loads((out / "baselines.json").read_text())
rows = {}
for s in sorted(out.glob("*/summary.json")):
    j = json.loads(s.read_text())
    optim = s.parent.name.rsplit("_lr", 1)[0]
    lr = float(s.parent.name.rsplit("_lr", 1)[1])
    rows.setdefault(optim, []).append((lr, j["final_val_loss"]))
lines = [f"# First look: new optimizers at equal tokens ({tokens} tokens, demo config, one seed)", "",
         f"Count baselines on the same val split: unigram {base['unigram']:.4f}, bigram "
         f"{base['bigram']:.4f} nats (prior weight {base['alpha']:g}, chosen on a dev split of train).", "",
         "| optimizer | LR | final val loss |", "|---|---|---|"]
fig, ax = plt.subplots(figsize=(7, 4.5))
for optim, r in rows.items():
    r.sort()
    best = min(r, key=lambda x: x[1])
    for lr, loss in r:
        mark = " **best**" if (lr, loss) == best else ""
        lines.append(f"| {optim} | {lr:g} | {loss:.4f}{mark} |")
    ax.plot([x[0] for x in r], [x[1] for x in r], marker="o", label=optim)
ax.axhline(base["bigram"], color="gray", ls="--", label="count bigram")
ax.set_xscale("log"); ax.set_xlabel("peak LR (each optimizer on its own scale)")
ax.set_ylabel("final val loss (nats/token)"); ax.legend(fontsize=8)
ax.set_title(f"{tokens} tokens, demo config (L4 C192), one seed")
fig.tight_layout(); fig.savefig(out / "val_vs_lr.png", dpi=110)
lines += ["", f"{sum(len(r) for r in rows.values())} runs; this invocation trained for {elapsed} s."]
(out / "REPORT.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
