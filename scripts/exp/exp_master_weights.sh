#!/usr/bin/env bash
# Experiment: what FP32 master weights buy when the compute copy is bf16.
#
# A small GPT (L4 H4 C128, T64, B8, the default KJV corpus) is trained three times with bf16
# params and grads, identical in everything else (seed, data order, AdamW, a smallish LR):
#   (a) master_fp32   --precision.master fp32   (the optimizer updates fp32 weights, then rounds)
#   (b) none_nearest  --precision.master none --precision.rounding nearest
#   (c) none_stoch    --precision.master none --precision.rounding stochastic
# plus a one-step run at lr 0 that only records the bf16 initial weights. Writes
# results/master_weights/table.md (final/best val loss per variant, tokens, and how many weights
# ever moved from their init) and results/master_weights/curves.png (val loss vs tokens).
#
# Why: bf16 keeps 8 significant bits, so neighbouring values near w are 2^-7..2^-8 x |w| apart and
# round-to-nearest discards any update smaller than half of that (~2^-8 |w|). AdamW's steps are
# ~lr in size, so with lr = 1e-4 every weight with |w| > ~0.01-0.03 (and every LayerNorm gain
# near 1, and all of the decoupled weight decay lr*wd*w) never changes in (b). Stochastic rounding
# (c) rounds up with probability (distance / spacing), so the update survives in expectation.
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), EXP_STEPS (default 200), EXP_LR (default
# 1e-4), EXP_OUT (default results/master_weights), EXP_THREADS (default 0: all cores).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start exp_master_weights
steps="${EXP_STEPS:-200}"
lr="${EXP_LR:-1e-4}"
out="${EXP_OUT:-results/master_weights}"
threads="${EXP_THREADS:-0}"
py=/usr/bin/python3

need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_default_corpus
mkdir -p "$out/runs"

common=(--data.dir data_out/kjv --train.out_dir "$out/runs" --train.overwrite true
  --model.n_layer 4 --model.n_head 4 --model.n_embd 128 --model.block_size 64
  --train.seq_len 64 --train.micro_batch 8 --train.seed 1337 --train.threads "$threads"
  --train.eval_windows 48 --train.log_interval 50
  --optim.name adamw --optim.weight_decay 0.1 --optim.schedule cosine --optim.warmup_steps 20
  --optim.min_lr_ratio 0.1 --precision.params bf16 --precision.grads bf16)

run() {  # NAME FLAGS...
  local name="$1"
  shift
  echo "exp_master_weights: run $name: $*"
  "$bin" train "${common[@]}" --train.name "$name" "$@" >"$out/runs/$name.log" 2>&1 || {
    echo "exp_master_weights: error: run $name failed; last lines of $out/runs/$name.log:" >&2
    tail -5 "$out/runs/$name.log" >&2
    exit 1
  }
  grep '^done:' "$out/runs/$name.log" || true
}

start=$(date +%s)
# Initial bf16 weights: one step at lr 0 (AdamW's update is exactly 0 and the decay factor 1).
run init --train.max_steps 1 --train.eval_interval 0 --optim.lr 0 --precision.master none \
  --precision.rounding nearest
eval_every=$((steps / 10 > 0 ? steps / 10 : 1))
run master_fp32 --train.max_steps "$steps" --train.eval_interval "$eval_every" --optim.lr "$lr" \
  --precision.master fp32
run none_nearest --train.max_steps "$steps" --train.eval_interval "$eval_every" --optim.lr "$lr" \
  --precision.master none --precision.rounding nearest
run none_stoch --train.max_steps "$steps" --train.eval_interval "$eval_every" --optim.lr "$lr" \
  --precision.master none --precision.rounding stochastic
elapsed=$(($(date +%s) - start))

"$py" scripts/plot.py --out "$out/curves.png" --metric val_loss --x tokens \
  --title "bf16 params, AdamW lr $lr: FP32 master vs none (nearest / stochastic rounding)" \
  "(a) fp32 master=$out/runs/master_fp32" "(b) no master, nearest=$out/runs/none_nearest" \
  "(c) no master, stochastic=$out/runs/none_stoch"

# Table and analysis: val losses from metrics.jsonl; from the saved weights, the share of weights
# whose bf16 value never moved from init, and the share whose half-spacing exceeds lr.
"$py" - "$out" "$lr" "$steps" "$elapsed" <<'EOF'
import json, os, struct, sys
import numpy as np

out, lr, steps, elapsed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
runs = os.path.join(out, "runs")

def metrics(name):
    recs = [json.loads(l) for l in open(os.path.join(runs, name, "metrics.jsonl")) if l.strip()]
    vals = [(r["tokens"], r["val_loss"]) for r in recs if "val_loss" in r]
    return vals, next(r for r in recs if r.get("summary"))

def load_bf16_bits(name):
    """Every tensor of model.safetensors as bf16 bit patterns (fp32 rounded to nearest even)."""
    raw = open(os.path.join(runs, name, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a:base + b]
        if info["dtype"] == "BF16":
            out[key] = np.frombuffer(buf, dtype=np.uint16).copy()
        elif info["dtype"] == "F32":
            u = np.frombuffer(buf, dtype=np.uint32).astype(np.uint64)
            out[key] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        else:
            sys.exit(f"unexpected dtype {info['dtype']} in {name}")
    return out

def to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)

init = load_bf16_bits("init")
w0 = np.concatenate([to_f32(init[k]) for k in sorted(init)])
# bf16 spacing at w: 2^(floor(log2|w|) - 7); nearest rounding drops steps below half of it.
nz = np.abs(w0) > 0
half_gap = np.zeros_like(w0)
half_gap[nz] = np.exp2(np.floor(np.log2(np.abs(w0[nz]))) - 8)
below = float(np.mean(half_gap > lr))
below_decay = float(np.mean(half_gap[nz] > lr * 0.1 * np.abs(w0[nz])))

variants = [("(a) fp32 master", "master_fp32"), ("(b) no master, round-to-nearest", "none_nearest"),
            ("(c) no master, stochastic rounding", "none_stoch")]
rows = []
for label, name in variants:
    vals, summ = metrics(name)
    w = load_bf16_bits(name)
    same = float(np.mean(np.concatenate([w[k] == init[k] for k in sorted(init)])))
    moved = np.concatenate([to_f32(w[k]) for k in sorted(init)]) - w0
    rows.append((label, vals[0][1], vals[-1][1], min(v for _, v in vals), summ["tokens"], same,
                 float(np.sqrt(np.mean(moved.astype(np.float64) ** 2))), summ["train_s"]))

a_final, b_final, c_final = rows[0][2], rows[1][2], rows[2][2]
with open(os.path.join(out, "table.md"), "w") as f:
    f.write("# bf16 params: FP32 master weights vs none\n\n")
    f.write(f"Small GPT (L4 H4 C128, T64, B8, KJV BPE-4096), bf16 params and grads, AdamW lr {lr:g} "
            f"(cosine, warmup 20, wd 0.1), {steps} steps each, seed 1337, same data order. "
            f"Total wall time {elapsed} s. Produced by scripts/exp/exp_master_weights.sh.\n\n")
    f.write("| variant | first val loss | final val loss | best val loss | tokens | "
            "weights never moved from init | RMS change of weights | train s |\n")
    f.write("|---|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write(f"| {r[0]} | {r[1]:.4f} | {r[2]:.4f} | {r[3]:.4f} | {r[4]:,} | {100*r[5]:.1f}% | "
                f"{r[6]:.2e} | {r[7]:.0f} |\n")
    f.write("\n![val loss vs tokens](curves.png)\n\n## What happened and why\n\n")
    f.write(
        f"bf16 keeps 8 significant bits, so near a weight w the representable values are "
        f"2^(floor(log2|w|)-7) apart, i.e. between 2^-8|w| and 2^-7|w|, and round-to-nearest "
        f"throws away any update smaller than half that spacing (~2^-8|w|). AdamW's update is "
        f"about lr = {lr:g} per step (|m/sqrt(v)| <= ~1), so every weight whose half-spacing "
        f"exceeds lr cannot move at all without a master copy: at init that is "
        f"{100*below:.1f}% of the weights (LayerNorm gains at 1.0 have half-spacing 2^-8 = 3.9e-3; "
        f"matrix weights larger than ~{lr*2**8:.3g}-{lr*2**9:.3g} in magnitude), and the decoupled "
        f"weight decay lr*wd*w is below half a spacing for {100*below_decay:.0f}% of the non-zero "
        f"weights, so it never acts. The cosine schedule lowers lr to {lr*0.1:g} by the last step, so "
        f"the share of lost updates grows as the run goes on.\n\n")
    def verdict(x):
        d = x - a_final
        if d > 0.02:
            return f"{d:+.4f} nats worse than (a)"
        if d < -0.02:
            return f"{d:+.4f} nats, better than (a)"
        return f"{d:+.4f} nats, within noise of (a)"
    f.write(
        f"- (a) FP32 master: updates accumulate in fp32 and are rounded only when the compute "
        f"copy is written, so small steps add up until they cross a bf16 boundary. Final val loss "
        f"{a_final:.4f}; {100*rows[0][5]:.1f}% of the weights have the same bf16 bits as at init "
        f"(their net change stayed within half a spacing).\n"
        f"- (b) no master, round-to-nearest: {100*rows[1][5]:.1f}% of the weights are bit-identical "
        f"to their initial value after {steps} steps: every update smaller than half the spacing "
        f"was rounded away, every step, and the RMS change of the weights is "
        f"{rows[1][6]/rows[0][6]:.2f}x that of (a). Final val loss {b_final:.4f} ({verdict(b_final)}).\n"
        f"- (c) no master, stochastic rounding: each write rounds away from w with probability equal "
        f"to the fraction of the spacing the update covers, so the stored value equals the fp32 "
        f"result in expectation and small updates survive on average ({100*rows[2][5]:.1f}% of "
        f"the weights never moved). Final val loss {c_final:.4f} ({verdict(c_final)}); the price is "
        f"rounding noise of up to one spacing per write (RMS change {rows[2][6]/rows[0][6]:.2f}x "
        f"that of (a)).\n")
print(open(os.path.join(out, "table.md")).read())
EOF
echo "exp_master_weights: wrote $out/table.md and $out/curves.png"
