#!/usr/bin/env bash
# Side-by-side training throughput at a Llama-style block: ledgerlm (fp32) against transformers'
# LlamaForCausalLM in PyTorch, eager and torch.compile (scripts/bench/bench_torch_llama.py), on
# the same shapes and random tokens, alternating within each repetition, 2 threads each.
#
# usage: scripts/bench/bench_vs_torch_llama.sh --venv DIR [--build DIR] [--reps N] [--steps N]
#                                              [--wait-load L] [CONFIG.toml]
#   --venv DIR  a Python virtual environment with torch and transformers installed from the
#               package index (`python3 -m venv DIR && DIR/bin/pip install torch transformers`);
#               this benchmark's own: neither setup.sh nor the tests use it.
#   default config: configs/bench_llama.toml; default build: build.
#
# Both sides run fp32 weights with AdamW. MFU = achieved GFLOP/s over the fp32 FMA peak that
# `ledgerlm bench` measures on the same 2 threads; FLOPs per token = 6N + 12*L*C*T with N the
# parameters (ledgerlm's count, vocab padding included). Each run reports the median over its
# timed steps; the table gives the median, min and max of those medians over the repetitions.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=build
reps=3
steps=10
venv=""
wait_load=""
cfg=configs/bench_llama.toml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --wait-load) wait_load="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) cfg="$1"; shift ;;
  esac
done
bin="$build/ledgerlm"
[[ -x "$bin" ]] || { echo "bench_vs_torch_llama: $bin not found (build the ledgerlm target, or pass --build DIR)" >&2; exit 1; }
[[ -n "$venv" ]] || { echo "bench_vs_torch_llama: --venv DIR is required (a venv with torch and transformers)" >&2; exit 1; }
py="$venv/bin/python"
"$py" -c "import torch, transformers" 2>/dev/null ||
  { echo "bench_vs_torch_llama: $py cannot import torch and transformers" >&2; exit 1; }
[[ -f "$cfg" ]] || { echo "bench_vs_torch_llama: config $cfg not found" >&2; exit 1; }

export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# toml_get KEY: the value of `KEY = value` in the config (first match), quotes stripped.
toml_get() { sed -nE "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\"?([^\"#]*)\"?.*/\1/p" "$cfg" | head -1 | tr -d ' '; }
L=$(toml_get n_layer); H=$(toml_get n_head); KV=$(toml_get n_kv_head); C=$(toml_get n_embd)
F=$(toml_get ffn_hidden); T=$(toml_get seq_len); B=$(toml_get micro_batch); V=$(toml_get vocab_size)
theta=$(toml_get rope_theta); eps=$(toml_get norm_eps)
echo "== $cfg: L$L H$H KV$KV C$C F$F T$T B$B vocab $V | $reps repetitions x $steps steps | threads 2 =="
: >"$tmp/ll"; : >"$tmp/eager"; : >"$tmp/compile"
for ((r = 1; r <= reps; r++)); do
  if [[ -n "$wait_load" ]]; then
    until awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v t="$wait_load" 'BEGIN { exit !(l < t) }'; do
      sleep 10
    done
  fi
  env -u OMP_WAIT_POLICY "$bin" bench --config "$cfg" --steps "$steps" >"$tmp/ll.log" 2>&1 ||
    { cat "$tmp/ll.log" >&2; exit 1; }
  sed -n 's/^bench_json //p' "$tmp/ll.log" >>"$tmp/ll"
  [[ $r -eq 1 ]] && cp "$tmp/ll.log" "$tmp/ll.first.log"
  for mode in eager compile; do
    "$py" scripts/bench/bench_torch_llama.py --layers "$L" --heads "$H" --kv-heads "$KV" \
      --embd "$C" --ffn "$F" --seq "$T" --batch "$B" --vocab "$V" --rope-theta "${theta:-10000}" \
      --eps "${eps:-1e-5}" --steps "$steps" --mode "$mode" 2>"$tmp/$mode.err" |
      sed -n 's/^torch_json //p' >>"$tmp/$mode" || { cat "$tmp/$mode.err" >&2; exit 1; }
  done
  echo "  repetition $r/$reps done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
done
/usr/bin/python3 - "$tmp" <<'EOF'
import json, statistics, sys
base = sys.argv[1]
def load(name):
    with open(f"{base}/{name}") as f:
        return [json.loads(line) for line in f if line.strip()]
ll, eager, comp = load("ll"), load("eager"), load("compile")
first = ll[0]
fpt = first["flops_per_token"]
peak = max(r["peak_fp32_gflops"] for r in ll)
bk = first.get("backend") or {}
if bk:
    print(f"cpu: {bk['cpu']} | path {bk['path']}")
t0 = (eager or comp)[0]
print(f"torch {t0['torch']}, transformers {t0['transformers']}, AdamW {t0['adamw']}, "
      f"{t0['threads']} threads; params: ledgerlm {first['params']}, torch {t0['params']}")
print(f"FLOPs per token (6N + 12*L*C*T) = {fpt:.4g}; measured fp32 FMA peak {peak:.1f} GFLOP/s")
rows = {"ledgerlm fp32": [r["tokens_per_s"] for r in ll],
        "torch eager (sdpa)": [r["tokens_per_s"] for r in eager],
        "torch.compile": [r["tokens_per_s"] for r in comp]}
print(f"{'contender':22s} {'tok/s med':>10s} {'min':>8s} {'max':>8s} {'GFLOP/s':>8s} {'MFU':>6s}")
med = {}
for name, tps in rows.items():
    if not tps:
        continue
    m = med[name] = statistics.median(tps)
    gf = m * fpt / 1e9
    print(f"{name:22s} {m:10.0f} {min(tps):8.0f} {max(tps):8.0f} {gf:8.1f} {100 * gf / peak:5.1f}%")
best = max((n for n in med if n.startswith("torch")), key=lambda n: med[n])
print(f"ratio ledgerlm fp32 / fastest torch ({best}): {med['ledgerlm fp32'] / med[best]:.2f}")
EOF
echo "-- ledgerlm bench, first repetition (split, top ops):"
sed -n '/^step (/p;/^op /,/^bench_json/p' "$tmp/ll.first.log" | grep -v '^bench_json' | head -30
