#!/usr/bin/env bash
# One prepared check for a GPU machine (see docs/gpu.md), under one deadline: the environment
# (build info, driver, CUDA library locations), an ldd preflight, the CUDA tests (the op harness,
# the ops at GPT-2 124M shapes against the CPU, the fp64 gradient checks on the cuda backend, the
# training tests, the NCCL Comm with one rank; grouped-query attention among them: the op
# harness's, gradient checks' and cuDNN attention's GQA cases and a Llama-style GQA block trained
# against the CPU; failing cases rerun with LEDGERLM_CUDA_SYNC_CHECK=1 and under compute-sanitizer
# when present), a 200-step training run of the small shape on the GPU next to the CPU (and its
# first steps again with dist.comm = nccl, one rank; then a Llama-style grouped-query block of
# that shape, 20 steps on the GPU next to 5 on the CPU), and scripts/gpu/bench_gpu.sh.
#
#   scripts/gpu/gpu_check.sh --out DIR [--deadline SECONDS] [--dry]
#
# Logs go to a temporary work directory; after EVERY stage scripts/gpu/gpu_pack.py packs it into
# DIR as at most five flat files (summary.txt, failures.txt, environment.txt, logs.tar.xz or
# logs.tar.gz), so a kill still leaves the evidence so far. Each stage has its own cap, cut to
# what is left of the deadline (default 300 s, GPU_CHECK_DEADLINE); a stage that would start with
# under 5 s left is skipped.
#
# --dry: the same stages on a machine without a GPU, against the CPU build (build/): the CUDA
# tests skip themselves, training runs on the guard backend, the benchmark runs a tiny shape on
# the CPU (bench_gpu.sh's checks, not its figures); then it lists what DIR holds (files, levels,
# sizes) -- what a real run would bring back.
#
# Binaries: a bundle made by scripts/gpu/gpu_bundle.sh (GPU_BUNDLE=dir, default build-gpu-bundle/
# bundle, unpacked from bundle.tar.xz when only that was copied), else a CUDA build in build-cuda.
# cudart, cuBLAS and cuBLASLt are looked for beside the toolkit and in Python site-packages.
#
# Test hooks: GPU_CHECK_BIN_DIR=dir is the build tree the dry run uses (default build/);
# GPU_CHECK_SLEEP_STAGE=name:seconds makes a stage sleep first (a hung stage);
# GPU_CHECK_FAIL_STAGE=name makes a stage fail.
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root" || exit 2
out=""
dry=0
deadline="${GPU_CHECK_DEADLINE:-300}"
usage="usage: scripts/gpu/gpu_check.sh --out DIR [--deadline SECONDS] [--dry]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:-}"; shift 2 ;;
    --deadline) deadline="${2:-}"; shift 2 ;;
    --dry) dry=1; shift ;;
    *) echo "gpu_check: unknown argument $1 ($usage)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "$usage" >&2; exit 2; }
[[ "$deadline" =~ ^[0-9]+$ ]] || { echo "gpu_check: --deadline must be whole seconds, got '$deadline'" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d /tmp/gpu_check.XXXXXX)"
mkdir -p "$work/logs"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
note() { echo "gpu_check: [$(elapsed) s] $*"; }
pack() { python3 "$repo_root/scripts/gpu/gpu_pack.py" "$work" "$out" || note "packing failed"; }

# --- where the binaries and the CUDA libraries are --------------------------------------------
site_nvidia_libs() {  # the lib dirs of pip-installed CUDA libraries (nvidia/*/lib)
  python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
seen = set()
for d in dirs:
    for lib in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib"))):
        if lib not in seen and os.path.isdir(lib):
            seen.add(lib)
            print(lib)
PY
}
toolkit_libs() {
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib /usr/local/cuda-*/lib64; do
    [[ -d "$d" ]] && echo "$d"
  done
}
cuda_lib_dirs=()
if [[ $dry -eq 0 ]]; then
  # The toolkit first, then site-packages, then whatever the loader already knows.
  while read -r d; do cuda_lib_dirs+=("$d"); done < <(toolkit_libs; site_nvidia_libs)
  for d in "${cuda_lib_dirs[@]}"; do export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"; done
fi
bundle="${GPU_BUNDLE:-build-gpu-bundle/bundle}"
build_info=""
if [[ $dry -eq 1 ]]; then
  bin_dir="${GPU_CHECK_BIN_DIR:-$repo_root/build}"
  export LEDGERLM_TEST_GUARD_BACKEND=1
else
  if [[ ! -x "$bundle/bin/ledgerlm" && -f "$bundle.tar.xz" ]]; then
    tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz" 2>/dev/null ||
      python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
        "$bundle.tar.xz" "$(dirname "$bundle")"
  fi
  if [[ -x "$bundle/bin/ledgerlm" ]]; then
    bin_dir="$(cd "$bundle/bin" && pwd)"
    export LD_LIBRARY_PATH="$(cd "$bundle/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    build_info="$bundle/BUILD_INFO"
  else
    bin_dir="$repo_root/build-cuda"
  fi
fi
find_test() { for d in "$bin_dir" "$bin_dir/tests"; do [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }; done; }
export LEDGERLM_TEST_BINARY="$bin_dir/ledgerlm"
export LEDGERLM_TEST_SOURCE_DIR="$repo_root"
export LEDGERLM_TEST_KEEP_TMP=1
export OMP_WAIT_POLICY=PASSIVE
export repo_root work out dry bin_dir build_info

# --- stages ---------------------------------------------------------------------------------
# Each stage is a function run in its own bash under `timeout`, output to logs/NAME.log; its
# verdict and seconds go to summary.txt, then the work directory is packed.
stage_environment() {
  local f="$work/environment.txt"
  {
    echo "== gpu_check $( [[ $dry -eq 1 ]] && echo '(dry run) ')on $(uname -n) at $(date -u +%FT%TZ)"
    echo "binaries: $bin_dir"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "== build info"
    if [[ -n "$build_info" && -f "$build_info" ]]; then cat "$build_info"
    else
      echo "(no BUILD_INFO: a build tree, described here)"
      "$repo_root/scripts/gpu/build_info.sh" "$bin_dir/ledgerlm"
    fi
    echo "== nvidia-smi -q"
    if command -v nvidia-smi >/dev/null; then nvidia-smi -q 2>&1 | head -400; else echo "nvidia-smi: not present"; fi
    echo "== driver"
    cat /proc/driver/nvidia/version 2>/dev/null || echo "/proc/driver/nvidia/version: not present"
    echo "== CUDA libraries (toolkit dirs, site-packages nvidia/*, ldconfig -p)"
    local name d
    for name in libcuda.so libcudart.so libcublas.so libcublasLt.so libcudnn.so libnccl.so; do
      local hits=()
      while read -r d; do
        for p in "$d/$name"*; do [[ -e "$p" ]] && hits+=("$p -> $(readlink -f "$p")"); done
      done < <(toolkit_libs; site_nvidia_libs)
      while read -r p; do hits+=("ldconfig: $p -> $(readlink -f "$p")"); done < \
        <(ldconfig -p 2>/dev/null | awk -v n="$name" 'index($1, n) == 1 {print $NF}')
      if [[ ${#hits[@]} -eq 0 ]]; then echo "$name: not found"
      else echo "$name:"; printf '  %s\n' "${hits[@]}"; fi
    done
    echo "== nvcc"
    (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>/dev/null && /usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -2
    echo "== compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo 'not present')"
  } >"$f" 2>&1
  head -3 "$f"
}
stage_preflight() {  # every library each binary needs resolves, or one line naming the missing
  local f missing=""
  for f in "$bin_dir/ledgerlm" "$(find_test test_backend_ops)" "$(find_test test_cuda_training)" \
      "$(find_test test_cuda_device)" "$(find_test test_backend_gpt2_shapes)" \
      "$(find_test test_ops_gradcheck)" "$(find_test test_model_gradcheck)" \
      "$(find_test test_model_lora_gradcheck)" "$(find_test test_comm_nccl)"; do
    if [[ -z "$f" || ! -x "$f" ]]; then
      # A CPU-only build has no test_cuda_device nor test_comm_nccl: the dry run goes on.
      [[ $dry -eq 1 && "$f" != "$bin_dir/ledgerlm" ]] && continue
      echo "gpu_check: preflight: binary missing: ${f:-a test binary}"
      return 1
    fi
    ldd "$f"
    missing+="$(ldd "$f" | awk '/not found/{print $1}') "
  done
  missing="$(echo $missing | tr ' ' '\n' | sort -u | tr '\n' ' ')"
  if [[ -n "${missing// /}" ]]; then
    echo "gpu_check: preflight: missing libraries: $missing(LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    return 1
  fi
}
run_gtest() {  # binary name [gtest filter]
  local t
  t="$(find_test "$1")"
  if [[ -z "$t" ]]; then
    echo "$1: not built"
    [[ $dry -eq 1 ]] && return 3  # a CPU-only build: skipped, not failed
    return 1
  fi
  "$t" --gtest_output="xml:$work/$1.xml" ${2:+--gtest_filter="$2"}
}
keep_temp_dirs() {  # copy the small files of the test temp dirs named in the logs, then remove them
  local d
  cat "$work"/logs/*.log 2>/dev/null | grep -o 'kept temp dir: .*' | cut -d' ' -f4- | while read -r d; do
    [[ -d "$d" ]] || continue
    mkdir -p "$work/test_tmp/$(basename "$d")"
    (cd "$d" && find . -type f -size -1024k \( -name '*.jsonl' -o -name '*.json' -o -name '*.txt' \
      -o -name '*.log' -o -name '*.toml' \) -exec cp --parents {} "$work/test_tmp/$(basename "$d")/" \;)
    rm -rf "$d"
  done
}
stage_test_cuda_device() { run_gtest test_cuda_device; }
stage_test_backend_ops() { run_gtest test_backend_ops; }
# The suites instantiated per backend name: their cuda instances only (the cpu and guard ones
# are CI's); a CPU-only build has none, and the filter then matches nothing.
stage_test_backend_gpt2_shapes() { run_gtest test_backend_gpt2_shapes '*/cuda'; }
stage_test_ops_gradcheck() { run_gtest test_ops_gradcheck '*/cuda'; }
stage_test_model_gradcheck() { run_gtest test_model_gradcheck '*/cuda'; }
stage_test_model_lora_gradcheck() { run_gtest test_model_lora_gradcheck '*/cuda'; }
stage_test_cuda_training() { run_gtest test_cuda_training; }
stage_test_cudnn_attention() { run_gtest test_cudnn_attention; }
# The NCCL Comm with one rank over the single Comm (the bundle has no MPI): NCCL's initialisation,
# every device-tensor collective (a sum of one term is the rank's own value), the async forms.
stage_test_comm_nccl() { run_gtest test_comm_nccl; }
stage_rerun_failed() {  # failing cases again: synchronizing launch checks, then memcheck
  local sanitizer t name cases
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  local any=0
  for name in test_cuda_device test_backend_ops test_cuda_training test_cudnn_attention \
      test_comm_nccl test_backend_gpt2_shapes test_ops_gradcheck test_model_gradcheck \
      test_model_lora_gradcheck; do
    cases="$(grep -hoE '^\[  FAILED  \] [A-Za-z0-9_/.]+' "$work/logs/$name.log" 2>/dev/null |
      awk '{print $4}' | sort -u | paste -sd:)"
    [[ -n "$cases" ]] || continue
    any=1
    t="$(find_test "$name")"
    echo "== $name: $cases with LEDGERLM_CUDA_SYNC_CHECK=1"
    LEDGERLM_CUDA_SYNC_CHECK=1 "$t" --gtest_filter="$cases" >"$work/logs/${name}_sync_check.log" 2>&1
    echo "exit $?"; grep -E 'cuda backend:|FAILED' "$work/logs/${name}_sync_check.log" | head -20
    if [[ -n "$sanitizer" ]]; then
      echo "== $name: $cases under compute-sanitizer --tool memcheck"
      "$sanitizer" --tool memcheck --print-limit 20 "$t" --gtest_filter="$cases" \
        >"$work/logs/${name}_memcheck.log" 2>&1
      echo "exit $?"; grep -E '=========' "$work/logs/${name}_memcheck.log" | head -20
    else
      echo "compute-sanitizer: not present"
    fi
  done
  if [[ $any -eq 0 ]]; then
    # Nothing failed: the synchronizing variant itself is proven on the op harness's GPU cases.
    echo "no failing test case to rerun; the cuda op cases with LEDGERLM_CUDA_SYNC_CHECK=1:"
    t="$(find_test test_backend_ops)"
    [[ -n "$t" ]] || return 0
    LEDGERLM_CUDA_SYNC_CHECK=1 "$t" --gtest_filter='*/cuda:CudaOnlyOps.*' \
      >"$work/logs/test_backend_ops_sync_check.log" 2>&1
    local rc=$?
    grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test|^\[  FAILED  \]' \
      "$work/logs/test_backend_ops_sync_check.log" | head -20
    return $rc
  fi
}
stage_train_small() {  # 200 steps on the GPU (dry: 5 on the guard backend), 10 on the CPU
  python3 -c "
import random
random.seed(5)
w='the lord said unto moses and land of egypt went up into mountain people light day'.split()
print(' '.join(random.choice(w) for _ in range($([[ $dry -eq 1 ]] && echo 20000 || echo 200000))))" >"$work/corpus.txt"
  "$bin_dir/ledgerlm" prepare --input "$work/corpus.txt" --out "$work/data" --tokenizer bytes
  local prep=$?
  rm -f "$work/corpus.txt"
  ((prep == 0)) || return 1
  local dev steps rc=0 gpu_dev=cuda gpu_steps=200 results=""
  local shape="--model.n_layer 6 --model.n_head 6 --model.n_embd 384 --model.block_size 256 --train.seq_len 256"
  # Dry: the guard backend is slow (guarded memory), so a tiny shape proves the stage only.
  [[ $dry -eq 1 ]] && { gpu_dev=cpu; gpu_steps=5; shape="--model.n_layer 1 --model.n_head 2 --model.n_embd 32 --model.block_size 32 --train.seq_len 32"; }
  for dev in gpu cpu; do
    steps=10; [[ $dev == gpu ]] && steps=$gpu_steps
    "$bin_dir/ledgerlm" train --data.dir "$work/data" --train.out_dir "$work/runs" \
      --train.name "small_$dev" $shape --train.micro_batch 8 --train.max_steps $steps \
      --train.eval_interval 0 --train.log_interval 20 --train.save_interval 0 \
      --train.device "$([[ $dev == gpu ]] && echo $gpu_dev || echo cpu)"
    local r=$?
    ((r == 0)) || rc=1
    results+="train on $dev ($steps steps): exit $r; "
  done
  # Grouped-query attention in a Llama-style block (rotary positions, RMSNorm, SwiGLU, no biases,
  # an untied head): 6 query heads on 2 kv heads (dry: 2 on 1), the losses compared as above.
  local gqa_kv=2 gqa_gpu_steps=20
  [[ $dry -eq 1 ]] && { gqa_kv=1; gqa_gpu_steps=3; }
  local gqa="--model.n_kv_head $gqa_kv --model.position rope --model.norm rmsnorm --model.mlp swiglu --model.bias false --model.tie_embeddings false"
  for dev in gpu cpu; do
    steps=5; [[ $dev == gpu ]] && steps=$gqa_gpu_steps
    "$bin_dir/ledgerlm" train --data.dir "$work/data" --train.out_dir "$work/runs" \
      --train.name "gqa_$dev" $shape $gqa --train.micro_batch 8 --train.max_steps $steps \
      --train.eval_interval 0 --train.log_interval 5 --train.save_interval 0 \
      --train.device "$([[ $dev == gpu ]] && echo $gpu_dev || echo cpu)"
    local r=$?
    ((r == 0)) || rc=1
    results+="grouped-query (n_kv_head $gqa_kv) train on $dev ($steps steps): exit $r; "
  done
  # dist.comm = nccl with one rank: 20 steps with and without it. One rank reduces no gradient
  # (dist.zero is then 0, and ModelState::reduce_gradients returns before any collective), so
  # the NCCL Comm is initialised, carries the host values through the single Comm and is torn
  # down, while the arithmetic is the plain run's: the losses must be equal bit for bit (a rerun
  # on one GPU is bitwise by construction, docs/gpu.md "Determinism"). Dry: the CPU refuses it.
  if [[ $dry -eq 1 ]]; then
    local refusal
    refusal="$("$bin_dir/ledgerlm" train --data.dir "$work/data" --train.out_dir "$work/runs" \
      --train.name small_nccl_cpu $shape --train.micro_batch 8 --train.max_steps 2 \
      --train.device cpu --dist.comm nccl 2>&1)"
    local r=$?
    echo "$refusal" | tail -3
    if ((r != 0)) && grep -q 'dist.comm = nccl needs train.device = cuda' <<<"$refusal"; then
      results+="dist.comm = nccl on the cpu: refused (exit $r); "
    else
      rc=1
      results+="dist.comm = nccl on the cpu: exit $r, without the refusal; "
    fi
  else
    local comm
    for comm in auto nccl; do  # auto: the single Comm at one rank
      "$bin_dir/ledgerlm" train --data.dir "$work/data" --train.out_dir "$work/runs" \
        --train.name "small_gpu_$comm" $shape --train.micro_batch 8 --train.max_steps 20 \
        --train.eval_interval 0 --train.log_interval 10 --train.save_interval 0 \
        --train.device cuda --dist.comm "$comm"
      local r=$?
      ((r == 0)) || rc=1
      results+="train on gpu, dist.comm = $comm (20 steps): exit $r; "
    done
  fi
  rm -rf "$work/data"
  # Weights and checkpoints are not evidence (and would crowd the size-limited archive).
  find "$work/runs" -type f \( -name "*.safetensors" -o -size +1024k \) -delete 2>/dev/null
  python3 "$repo_root/scripts/gpu/run_losses.py" compare "$work/runs/small_gpu" "$work/runs/small_cpu"
  python3 "$repo_root/scripts/gpu/run_losses.py" compare "$work/runs/gqa_gpu" "$work/runs/gqa_cpu" \
    "grouped-query shape (n_kv_head $gqa_kv)"
  if [[ $dry -eq 0 ]]; then
    python3 "$repo_root/scripts/gpu/run_losses.py" bitwise "$work/runs/small_gpu_auto" \
      "$work/runs/small_gpu_nccl" nccl || { rc=1; results+="dist.comm = nccl: losses or comm differ; "; }
  fi
  echo "$results"  # last, so the summary line says which run failed
  return $rc
}
stage_bench() {  # dry: the same script on the CPU binary at a tiny shape (its logic, not speed)
  mkdir -p "$work/bench"
  if [[ $dry -eq 1 ]]; then
    export BENCH_DEVICE=cpu BENCH_MICRO_BATCHES="8 4" BENCH_SHAPE="--model.n_layer 1 \
--model.n_head 2 --model.n_embd 32 --model.block_size 64 --model.vocab_size 64 \
--train.seq_len 64 --optim.lr 0.01"
  fi
  # bench_gpu.sh never fails on timing; it fails when no micro-batch ran, on an error that is not
  # out-of-memory, and on a loss that is non-finite or not falling.
  LEDGERLM_BIN="$bin_dir/ledgerlm" BENCH_STEPS=4 BENCH_WARMUP=1 BENCH_DEADLINE="$STAGE_CAP" \
    "$repo_root/scripts/gpu/bench_gpu.sh" --out "$work/bench" | tee "$work/bench/summary.txt"
  return "${PIPESTATUS[0]}"
}
# The same benchmark with our attention kernel (precision.attention = own) at the micro-batch the
# first one ran (auto: cuDNN's fused attention where it loads): the two side by side say what
# the attention costs. Dry: the CPU binary again (the CPU always runs its own kernel).
stage_bench_own() {
  mkdir -p "$work/bench_own"
  local ran
  ran="$(sed -nE 's/.*ok: micro_batch ([0-9]+) ran.*/\1/p' "$work/bench/summary.txt" 2>/dev/null | tail -1)"
  if [[ $dry -eq 1 ]]; then
    export BENCH_DEVICE=cpu BENCH_SHAPE="--model.n_layer 1 --model.n_head 2 --model.n_embd 32 \
--model.block_size 64 --model.vocab_size 64 --train.seq_len 64 --optim.lr 0.01"
    ran="${ran:-8}"
  fi
  [[ -n "$ran" ]] && export BENCH_MICRO_BATCHES="$ran"
  LEDGERLM_BIN="$bin_dir/ledgerlm" BENCH_STEPS=4 BENCH_WARMUP=1 BENCH_DEADLINE="$STAGE_CAP" \
    "$repo_root/scripts/gpu/bench_gpu.sh" --out "$work/bench_own" --precision.attention own |
    tee "$work/bench_own/summary.txt"
  return "${PIPESTATUS[0]}"
}
export -f site_nvidia_libs toolkit_libs find_test run_gtest stage_environment stage_preflight \
  stage_test_cuda_device stage_test_backend_ops stage_test_cuda_training \
  stage_test_cudnn_attention stage_test_backend_gpt2_shapes \
  stage_test_ops_gradcheck stage_test_model_gradcheck stage_test_model_lora_gradcheck \
  stage_test_comm_nccl stage_rerun_failed \
  stage_train_small stage_bench stage_bench_own

status=0
stop_reason=""
run_stage() {  # name cap_s [dry_skip]
  local name="$1" cap="$2" left verdict rc t0 log="$work/logs/$1.log"
  left=$((deadline - $(elapsed)))
  ((cap > left - 5)) && cap=$((left - 5))
  if [[ -n "$stop_reason" ]]; then verdict="skipped"; rc=0; echo "$stop_reason" >"$log"
  elif [[ "${3:-}" == dry_skip && $dry -eq 1 ]]; then verdict="skipped"; rc=0; echo "needs a GPU (dry run)" >"$log"
  elif ((cap < 1)); then verdict="skipped"; rc=0; echo "deadline ${deadline} s reached" >"$log"
  else
    t0=$(date +%s)
    local sleep_s=0
    [[ "${GPU_CHECK_SLEEP_STAGE:-}" == "$name":* ]] && sleep_s="${GPU_CHECK_SLEEP_STAGE#*:}"
    [[ "$sleep_s" =~ ^[0-9]+$ ]] || sleep_s=0
    local fail=0
    [[ "${GPU_CHECK_FAIL_STAGE:-}" == "$name" ]] && fail=1
    STAGE_CAP=$cap timeout -k 5 "$cap" bash -c "sleep $sleep_s; [[ $fail -eq 0 ]] || { echo 'failing on request (GPU_CHECK_FAIL_STAGE)'; exit 1; }; stage_$name" \
      >"$log" 2>&1
    rc=$?
    keep_temp_dirs
    t0=$(($(date +%s) - t0))
    if ((rc == 124 || rc == 137)); then verdict="timeout"; echo "gpu_check: killed after its cap of $cap s" >>"$log"
    elif ((rc == 0)); then verdict="ok"
    elif ((rc == 3)); then verdict="skipped"  # the stage found nothing to do here
    else verdict="failed"; fi
  fi
  [[ $verdict == ok || $verdict == skipped ]] || status=1
  printf 'stage %s %s %s s (cap %s s, exit %s)%s\n' "$name" "$verdict" "${t0:-0}" "$cap" "$rc" \
    "$( [[ $verdict == failed || $verdict == timeout ]] && echo ": $(grep -v '^\s*$' "$log" | tail -1 | cut -c1-200)")" \
    >>"$work/summary.txt"
  note "$(tail -1 "$work/summary.txt")"
  pack
  if [[ $name == preflight && $verdict != ok ]]; then
    stop_reason="preflight failed: $(tail -1 "$log")"
    note "$stop_reason"
  fi
}
: >"$work/summary.txt"
note "deadline ${deadline} s, output $out$( [[ $dry -eq 1 ]] && echo ' (dry run)')"
run_stage environment 20
run_stage preflight 10
run_stage test_cuda_device 30
run_stage test_backend_ops 60
run_stage test_cuda_training 120
run_stage test_cudnn_attention 60
run_stage test_comm_nccl 30
run_stage test_backend_gpt2_shapes 60
run_stage test_ops_gradcheck 20
run_stage test_model_gradcheck 30
run_stage test_model_lora_gradcheck 30
run_stage rerun_failed 60
run_stage train_small 120
run_stage bench 150
run_stage bench_own 90
echo "done: status $status after $(elapsed) s" >>"$work/summary.txt"
pack
note "what comes back from $out:"
(cd "$out" && find . -type f -printf '%d %s %P\n' | sort -k3 | while read -r depth size path; do
  printf '  %-20s level %d  %10d bytes\n' "$path" "$depth" "$size"
done)
exit $status
