#!/usr/bin/env bash
# Side-by-side training throughput: ledgerlm (fp32 params; bf16 params; fp16 params; bf16 params
# with precision.matmul = bf16) against PyTorch's standard GPT variants, on the same shapes and
# random tokens, alternating within each repetition.
#
# usage: scripts/bench/bench_vs_torch.sh [--build DIR] [--reps N] [--steps N] [--path avx512|avx2|portable]
#                                  [--wait-load L] [CONFIG.toml ...]
#   default configs: configs/bench_tiny.toml configs/bench_small.toml; default build: build;
#   default path: the CPU's best (what ledgerlm picks by itself). --wait-load L: before each
#   repetition, wait until the 1-minute load average is below L (machines shared with other work;
#   the load is printed after every repetition either way).
#
# PyTorch (Debian's python3-torch, scripts/bench/bench_torch_step.py), every variant with
# OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE (without them it is ~3x
# slower here):
#   torch module+foreach         nn.Module GPT (nn.Linear with addmm bias, nn.GELU(tanh), manual
#                                causal attention) and AdamW(foreach=True): the strongest standard
#   torch module+foreach avx512  the same with ATEN_CPU_CAPABILITY=avx512 (Debian's torch uses its
#                                AVX2 kernels by default; AVX-512 paths and CPUs only)
#   torch module+foreach spin    the same with GOMP_SPINCOUNT=1000, the short spin ledgerlm uses
#   torch module                 nn.Module GPT, AdamW's per-tensor loop
#   torch functional             the plain-tensor reference of tests/reference/gpt_ref.py
# Torch's sgemm is the system OpenBLAS (libblas.so.3, OpenMP build); it gets the OPENBLAS_CORETYPE
# ledgerlm reports using (older OpenBLAS falls back to generic kernels on CPUs it does not know).
# --path avx2 runs ledgerlm with LEDGERLM_CPU_ISA=avx2 and torch with ATEN_CPU_CAPABILITY=avx2,
# ONEDNN_MAX_CPU_ISA=AVX2 and OPENBLAS_CORETYPE=Haswell: an AVX-512 machine then measures the
# AVX2 code of both sides (not the same as an AVX2 CPU: its cores, caches and clocks stay).
# ledgerlm runs with its own threading defaults (OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=1000).
#
# Each run reports the median over its timed steps; the table gives the median, min and max of
# those medians over the repetitions, and every ledgerlm row's ratio to the fastest torch variant
# (by median). Peak: `ledgerlm bench` runs an FMA micro-benchmark (fp32, and bf16 dot-product
# VDPBF16PS where the CPU has it) on the same threads; MFU = achieved GFLOP/s / that peak, FLOPs
# per token = 6N + 12*L*C*T. The bf16-matmul row's MFU is against the bf16 dot peak where its
# GEMMs run on it; every other row's against the fp32 FMA peak.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_vs_torch

build=build
reps=3
steps=10
path=""
wait_load=""
parse_options 2,37 build reps steps path wait-load -- "$@"
configs=("${positional[@]}")
[[ ${#configs[@]} -gt 0 ]] || configs=(configs/bench_tiny.toml configs/bench_small.toml)
bin="$build/ledgerlm"
need_exec "$bin" "build the ledgerlm target, or pass --build DIR"
py=/usr/bin/python3
need_python_module "$py" torch "apt install python3-torch"

export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
ll_env=()
torch_env=()
if [[ -n "$path" ]]; then
  ll_env=(LEDGERLM_CPU_ISA="$path")
  case "$path" in
    avx2) torch_env=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell) ;;
    portable) torch_env=(ATEN_CPU_CAPABILITY=default) ;;
  esac
fi
# ATen's AVX-512 kernels die with SIGILL on a CPU without AVX-512F: that variant is skipped there.
have_avx512=0
grep -qw avx512f /proc/cpuinfo && have_avx512=1
# ledgerlm without the exported wait policy: it picks its own (see above).
ledgerlm() { env -u OMP_WAIT_POLICY "${ll_env[@]}" "$bin" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The OpenBLAS core ledgerlm runs on (its bench prints "OpenBLAS (core NAME)"), for torch too.
core=$(ledgerlm bench --config "${configs[0]}" --steps 1 --warmup 0 2>&1 |
  sed -nE 's/.*OpenBLAS \(core ([A-Za-z0-9]+)\).*/\1/p' | head -1)
[[ ${#torch_env[@]} -gt 0 && "$path" == avx2 ]] || torch_env+=(OPENBLAS_CORETYPE="$core")

# toml_get FILE KEY: the value of `KEY = value` (first match), quotes stripped.
toml_get() { sed -nE "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"?([^\"#]*)\"?.*/\1/p" "$1" | head -1 | tr -d ' '; }

ll_names=(fp32 bf16 fp16 mm16)
ll_flags=("--precision.params fp32" "--precision.params bf16" "--precision.params fp16"
  "--precision.params bf16 --precision.matmul bf16")
torch_names=(t_foreach t_foreach512 t_spin t_module t_functional)
torch_flags=("--model module --foreach" "--model module --foreach" "--model module --foreach"
  "--model module" "--model functional")
torch_extra=("" "ATEN_CPU_CAPABILITY=avx512" "GOMP_SPINCOUNT=1000" "" "")

for cfg in "${configs[@]}"; do
  need_file "$cfg" "a config file"
  L=$(toml_get "$cfg" n_layer); H=$(toml_get "$cfg" n_head); C=$(toml_get "$cfg" n_embd)
  T=$(toml_get "$cfg" seq_len); B=$(toml_get "$cfg" micro_batch); V=$(toml_get "$cfg" vocab_size)
  echo "== $cfg: L$L H$H C$C T$T B$B vocab $V | $reps repetitions x $steps steps | threads 2 | path ${path:-default} =="
  out="$tmp/$(basename "$cfg" .toml)"
  for n in "${ll_names[@]}" "${torch_names[@]}"; do : >"$out.$n"; done
  for ((r = 1; r <= reps; r++)); do
    if [[ -n "$wait_load" ]]; then
      until awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v t="$wait_load" 'BEGIN { exit !(l < t) }'; do
        sleep 10
      done
    fi
    for i in "${!ll_names[@]}"; do
      n=${ll_names[$i]}
      # shellcheck disable=SC2086
      ledgerlm bench --config "$cfg" --steps "$steps" ${ll_flags[$i]} >"$out.log" 2>&1 ||
        { cat "$out.log" >&2; exit 1; }
      grep '^bench_json ' "$out.log" | sed 's/^bench_json //' >>"$out.$n"
      [[ $r -eq 1 ]] && cp "$out.log" "$out.first_$n.log"
      # One torch variant after each ledgerlm row, so both sides share each slow phase.
      for j in "${!torch_names[@]}"; do
        (( j % ${#ll_names[@]} == i )) || continue
        tn=${torch_names[$j]}
        [[ "$tn" == t_foreach512 && ( "$path" == avx2 || "$path" == portable || $have_avx512 == 0 ) ]] &&
          continue
        # shellcheck disable=SC2086
        env "${torch_env[@]}" ${torch_extra[$j]} "$py" scripts/bench/bench_torch_step.py --layers "$L" \
          --heads "$H" --embd "$C" --seq "$T" --batch "$B" --vocab "$V" --steps "$steps" \
          ${torch_flags[$j]} | sed -n 's/^torch_json //p' >>"$out.$tn"
      done
    done
    echo "  repetition $r/$reps done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  done
  "$py" - "$out" <<'EOF'
import json, statistics, sys
base = sys.argv[1]
def load(suffix):
    with open(base + "." + suffix) as f:
        return [json.loads(line) for line in f if line.strip()]
ll = {"ledgerlm fp32": "fp32", "ledgerlm bf16": "bf16", "ledgerlm fp16": "fp16",
      "ledgerlm bf16 matmul": "mm16"}
tv = {"torch module+foreach": "t_foreach", "torch module+foreach avx512": "t_foreach512",
      "torch module+foreach spin": "t_spin", "torch module": "t_module",
      "torch functional": "t_functional"}
runs = {name: load(s) for name, s in list(ll.items()) + list(tv.items())}
runs = {k: v for k, v in runs.items() if v}
first = runs["ledgerlm fp32"][0]
fpt = first["flops_per_token"]
ours = [r for name in ll if name in runs for r in runs[name]]
peak32 = max(r["peak_fp32_gflops"] for r in ours)
peak16 = max(r["peak_bf16_gflops"] for r in ours)
bk = first.get("backend") or {}
if bk:
    print(f"cpu: {bk['cpu']} | path {bk['path']}")
    print(f"gemm: {bk['gemm']}")
t0 = next(iter(runs[n] for n in tv if n in runs))[0]
print(f"torch: BLAS {t0['blas']}, OPENBLAS_CORETYPE={t0['openblas_coretype'] or '(auto)'}, "
      f"ATen capability {t0.get('cpu_capability', '?')} (default variant)")
print(f"FLOPs per token (6N + 12*L*C*T, N = {first['params']} ledgerlm params incl. vocab padding) = {fpt:.4g}")
print(f"measured peak (FMA micro-benchmark, 2 threads, best of runs): fp32 {peak32:.1f} GFLOP/s"
      + (f", bf16 dot {peak16:.1f} GFLOP/s" if peak16 > 0 else ", no bf16 dot-product"))
med = {}
print(f"{'contender':28s} {'tok/s med':>10s} {'min':>8s} {'max':>8s} {'GFLOP/s':>8s} {'MFU':>6s} {'peak RSS MB':>12s}")
for name, rs in runs.items():
    tps = [r["tokens_per_s"] for r in rs]
    m = statistics.median(tps)
    med[name] = m
    gf = m * fpt / 1e9
    peak = peak16 if name.endswith("matmul") and peak16 > 0 else peak32
    rss = max(r["peak_rss_bytes"] for r in rs) / 1e6
    print(f"{name:28s} {m:10.0f} {min(tps):8.0f} {max(tps):8.0f} {gf:8.1f} {100 * gf / peak:5.1f}% {rss:12.1f}")
best_name = max((n for n in tv if n in med), key=lambda n: med[n])
for name in ll:
    if name in med:
        print(f"ratio {name} / fastest torch ({best_name}): {med[name] / med[best_name]:.2f}")
print(f"ratio ledgerlm bf16 / fp32: {med['ledgerlm bf16'] / med['ledgerlm fp32']:.2f}, "
      f"fp16 / fp32: {med['ledgerlm fp16'] / med['ledgerlm fp32']:.2f}")
EOF
  for n in fp32 bf16 fp16; do
    echo "-- ledgerlm bench, first repetition, $n (split, top ops, GEMM by shape):"
    sed -n '/^step (/p;/^op /,/^bench_json/p' "$out.first_$n.log" | grep -v '^bench_json' | head -40
  done
  echo
done
