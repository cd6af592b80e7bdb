#!/usr/bin/env bash
# Side-by-side training throughput: ledgerlm (fp32 params; bf16 params; bf16 params with
# precision.matmul = bf16, i.e. the bf16 dot-product GEMM) vs the PyTorch reference model
# (tests/reference/gpt_ref.py, torch.optim.AdamW) on the same shapes and random tokens.
#
# usage: scripts/bench_vs_torch.sh [--build DIR] [--reps N] [--steps N] [CONFIG.toml ...]
#   default configs: configs/bench_tiny.toml configs/bench_small.toml; default build: build.
#
# Runs alternate (ledgerlm fp32, torch, torch with OPENBLAS_CORETYPE=Cooperlake, torch with a
# short spin before sleeping, ledgerlm bf16, ledgerlm bf16 matmul)
# in each repetition, so slow phases of a shared machine hit every contender alike. PyTorch gets
# OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE (without them it is ~3x
# slower here). Debian's torch takes its sgemm from the system OpenBLAS (openmp build through
# libblas.so.3), which falls back to generic kernels on this CPU unless OPENBLAS_CORETYPE is set:
# both variants are reported. ledgerlm runs with its own defaults (it sets OMP_WAIT_POLICY=PASSIVE
# with GOMP_SPINCOUNT=1000 when the user set no wait policy): the third torch variant gets that
# same short spin, so neither side has a threading setting the other lacks. Each run reports the median over its timed steps; the table gives
# the median, min and max of those medians over the repetitions.
#
# Peak: `ledgerlm bench` runs an FMA micro-benchmark (fp32, and bf16 dot-product VDPBF16PS where
# the CPU has it) on the same threads; MFU = achieved GFLOP/s / that peak, FLOPs per token =
# 6N + 12*L*C*T (printed). The bf16-matmul row's MFU is against the bf16 dot peak (the units its
# GEMMs run on, where the CPU has them); every other row's against the fp32 FMA peak.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
reps=5
steps=10
configs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[[ ${#configs[@]} -gt 0 ]] || configs=(configs/bench_tiny.toml configs/bench_small.toml)
bin="$build/ledgerlm"
[[ -x "$bin" ]] || { echo "bench_vs_torch: $bin not found (build the ledgerlm target, or pass --build DIR)" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c "import torch" 2>/dev/null || { echo "bench_vs_torch: $py has no torch (apt install python3-torch)" >&2; exit 1; }

export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
# ledgerlm without the exported wait policy: it picks its own (see above).
ledgerlm() { env -u OMP_WAIT_POLICY "$bin" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# toml_get FILE KEY: the value of `KEY = value` (first match), quotes stripped.
toml_get() { sed -nE "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"?([^\"#]*)\"?.*/\1/p" "$1" | head -1 | tr -d ' '; }

for cfg in "${configs[@]}"; do
  [[ -f "$cfg" ]] || { echo "bench_vs_torch: config $cfg not found" >&2; exit 1; }
  L=$(toml_get "$cfg" n_layer); H=$(toml_get "$cfg" n_head); C=$(toml_get "$cfg" n_embd)
  T=$(toml_get "$cfg" seq_len); B=$(toml_get "$cfg" micro_batch); V=$(toml_get "$cfg" vocab_size)
  echo "== $cfg: L$L H$H C$C T$T B$B vocab $V | $reps repetitions x $steps steps | threads 2 =="
  out="$tmp/$(basename "$cfg" .toml)"
  : >"$out.ll_fp32"; : >"$out.ll_bf16"; : >"$out.ll_mm16"; : >"$out.torch"; : >"$out.torch_cl"
  : >"$out.torch_spin"
  for ((r = 1; r <= reps; r++)); do
    ledgerlm bench --config "$cfg" --steps "$steps" --precision.params fp32 >"$out.log" 2>&1 ||
      { cat "$out.log" >&2; exit 1; }
    grep '^bench_json ' "$out.log" | sed 's/^bench_json //' >>"$out.ll_fp32"
    [[ $r -eq 1 ]] && cp "$out.log" "$out.first_fp32.log"
    OPENBLAS_CORETYPE= "$py" scripts/bench_torch_step.py --layers "$L" --heads "$H" --embd "$C" \
      --seq "$T" --batch "$B" --vocab "$V" --steps "$steps" | sed -n 's/^torch_json //p' >>"$out.torch"
    OPENBLAS_CORETYPE=Cooperlake "$py" scripts/bench_torch_step.py --layers "$L" --heads "$H" \
      --embd "$C" --seq "$T" --batch "$B" --vocab "$V" --steps "$steps" |
      sed -n 's/^torch_json //p' >>"$out.torch_cl"
    OPENBLAS_CORETYPE=Cooperlake GOMP_SPINCOUNT=1000 "$py" scripts/bench_torch_step.py \
      --layers "$L" --heads "$H" --embd "$C" --seq "$T" --batch "$B" --vocab "$V" \
      --steps "$steps" | sed -n 's/^torch_json //p' >>"$out.torch_spin"
    ledgerlm bench --config "$cfg" --steps "$steps" --precision.params bf16 >"$out.log" 2>&1 ||
      { cat "$out.log" >&2; exit 1; }
    grep '^bench_json ' "$out.log" | sed 's/^bench_json //' >>"$out.ll_bf16"
    [[ $r -eq 1 ]] && cp "$out.log" "$out.first_bf16.log"
    ledgerlm bench --config "$cfg" --steps "$steps" --precision.params bf16 \
      --precision.matmul bf16 >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    grep '^bench_json ' "$out.log" | sed 's/^bench_json //' >>"$out.ll_mm16"
    [[ $r -eq 1 ]] && cp "$out.log" "$out.first_mm16.log"
    echo "  repetition $r/$reps done (load average $(cut -d' ' -f1 /proc/loadavg))"
  done
  "$py" - "$out" <<'EOF'
import json, statistics, sys
base = sys.argv[1]
def load(suffix):
    with open(base + suffix) as f:
        return [json.loads(line) for line in f if line.strip()]
runs = {"ledgerlm fp32": load(".ll_fp32"), "ledgerlm bf16": load(".ll_bf16"),
        "ledgerlm bf16 matmul": load(".ll_mm16"),
        "torch (default core)": load(".torch"), "torch (Cooperlake)": load(".torch_cl"),
        "torch (Cooperlake+spin)": load(".torch_spin")}
ll = runs["ledgerlm fp32"][0]
fpt = ll["flops_per_token"]
ours = runs["ledgerlm fp32"] + runs["ledgerlm bf16"] + runs["ledgerlm bf16 matmul"]
peak32 = max(r["peak_fp32_gflops"] for r in ours)
peak16 = max(r["peak_bf16_gflops"] for r in ours)
print(f"FLOPs per token (6N + 12*L*C*T, N = {ll['params']} ledgerlm params incl. vocab padding) = {fpt:.4g}")
print(f"measured peak (FMA micro-benchmark, 2 threads, best of runs): fp32 {peak32:.1f} GFLOP/s"
      + (f", bf16 dot {peak16:.1f} GFLOP/s" if peak16 > 0 else ", no bf16 dot-product"))
med = {}
print(f"{'contender':24s} {'tok/s med':>10s} {'min':>8s} {'max':>8s} {'GFLOP/s':>8s} {'MFU':>6s} {'peak RSS MB':>12s}")
for name, rs in runs.items():
    tps = [r["tokens_per_s"] for r in rs]
    m = statistics.median(tps)
    med[name] = m
    gf = m * fpt / 1e9
    peak = peak16 if name.endswith("matmul") and peak16 > 0 else peak32
    rss = max(r["peak_rss_bytes"] for r in rs) / 1e6
    print(f"{name:24s} {m:10.0f} {min(tps):8.0f} {max(tps):8.0f} {gf:8.1f} {100 * gf / peak:5.1f}% {rss:12.1f}")
torch_names = ("torch (default core)", "torch (Cooperlake)", "torch (Cooperlake+spin)")
best_torch = max(med[n] for n in torch_names)
for name in ("ledgerlm fp32", "ledgerlm bf16", "ledgerlm bf16 matmul"):
    print(f"ratio {name} / torch: {med[name] / med['torch (default core)']:.2f} (default core), "
          f"{med[name] / med['torch (Cooperlake)']:.2f} (Cooperlake), "
          f"{med[name] / med['torch (Cooperlake+spin)']:.2f} (Cooperlake+spin), "
          f"{med[name] / best_torch:.2f} (best torch)")
print("(ledgerlm bf16: bf16 weights widened to fp32 for sgemm; bf16 matmul: GEMM operands rounded to"
      " bf16 on VDPBF16PS, MFU against the bf16 dot peak;"
      f" torch BLAS: {runs['torch (default core)'][0]['blas']})")
EOF
  echo "-- ledgerlm bench, first repetition, fp32 (split and top ops):"
  sed -n '/^step /p;/^op /,/^bench_json/p' "$out.first_fp32.log" | grep -v '^bench_json' | head -12
  echo "-- ledgerlm bench, first repetition, bf16:"
  sed -n '/^step /p;/^op /,/^bench_json/p' "$out.first_bf16.log" | grep -v '^bench_json' | head -12
  echo "-- ledgerlm bench, first repetition, bf16 matmul:"
  sed -n '/^step /p;/^op /,/^bench_json/p' "$out.first_mm16.log" | grep -v '^bench_json' | head -12
  echo
done
