#!/usr/bin/env python3
"""scripts/gpu/bench_gpu.sh's verdicts, on the CPU: a fake ledgerlm binary plays each case (an
out-of-memory line at the first micro-batch then a good run, an error that is not out-of-memory,
a crash, a rising loss, a non-finite loss, out of memory everywhere, a planner prediction over
the device's memory), and the real CPU binary runs a tiny shape through it end to end.

  test_bench_gpu_script.py BUILD_DIR

About 5 s on 2 cores. BENCH_GPU_SCRIPT=path runs another version of the script.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.environ.get("BENCH_GPU_SCRIPT") or os.path.join(REPO, "scripts", "gpu", "bench_gpu.sh")

# The fake binary: `memory` predicts 10 GB per sequence of micro-batch; `bench` appends its
# micro-batch to calls.txt and does what FAKE_MODE says for it.
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
mb = int(args[args.index("--train.micro_batch") + 1])
if args[0] == "memory":
    print("component  dtype  bytes/param  total GB  per rank GB")
    print(f"predicted peak per rank                                         {10.0 * mb:.3f}")
    sys.exit(0)
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(f"{mb}\n")
mode = os.environ["FAKE_MODE"]
good = [10.9, 10.7, 10.5, 10.2]
def ok(losses):
    rec = {"tokens_per_s": 1000.0 * mb, "mfu": 0.4, "losses": losses,
           "gpu": {"device": "NVIDIA H200", "table_entry": "H200 SXM",
                   "mfu_vs_measured_gemm": 0.5, "gemm_matmul_tflops": 800.0}}
    print("tokens/s", 1000 * mb)
    print("bench_json " + json.dumps(rec))  # NaN as Python writes it; null as the bench does
    sys.exit(0)
if mode == "oom_then_ok" and mb == 16:
    print("ledgerlm: error: out of device memory allocating 1073741824 bytes for activations")
    sys.exit(1)
if mode == "cublas_oom_then_ok" and mb == 16:
    print("ledgerlm: error: cuda backend: cublasLtMatmul(...): CUBLAS_STATUS_ALLOC_FAILED")
    sys.exit(1)
if mode == "all_oom":
    print("ledgerlm: error: out of device memory allocating 1 bytes for grads")
    sys.exit(1)
if mode == "error" and mb == 16:
    print("ledgerlm: error: cuda backend: cudaStreamSynchronize(stream_): cudaErrorIllegalAddress "
          "(an illegal memory access was encountered)")
    sys.exit(1)
if mode == "crash":
    os.kill(os.getpid(), 11)
if mode == "rising":
    ok([10.2, 10.5, 10.7, 10.9])
if mode == "flat":
    ok([10.5, 10.4, 10.6, 10.5])
if mode == "nan":
    ok([10.9, float("nan"), 10.5, 10.2])
if mode == "null":
    ok([10.9, 10.7, None, 10.2])
if mode == "no_json":
    print("tokens/s 1000")
    sys.exit(0)
ok(good)
'''


def run(binary, env_extra, tmp):
    calls = os.path.join(tmp, "calls.txt")
    if os.path.exists(calls):
        os.remove(calls)
    env = dict(os.environ, LEDGERLM_BIN=binary, FAKE_CALLS=calls, BENCH_DEADLINE="60",
               BENCH_TRY_S="30", BENCH_MICRO_BATCHES="16 8 4")
    env.pop("BENCH_DEVICE_MEMORY_GB", None)
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi: the device memory comes from the case
    env.update(env_extra)
    out = os.path.join(tmp, "out")
    p = subprocess.run([SCRIPT, "--out", out], env=env, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    tried = open(calls).read().split() if os.path.exists(calls) else []
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p.returncode, tried, p.stdout, last


def main():
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "ledgerlm")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)

        # (mode, extra env, expected exit, expected micro-batches benched, words in the last line)
        cases = [
            ("good", {}, 0, ["16"], "ok: micro_batch 16"),
            ("oom_then_ok", {}, 0, ["16", "8"], "ok: micro_batch 8"),
            ("cublas_oom_then_ok", {}, 0, ["16", "8"], "ok: micro_batch 8"),
            ("all_oom", {}, 1, ["16", "8", "4"], "FAILED: no micro-batch"),
            ("error", {}, 1, ["16"], "not out-of-memory"),
            ("crash", {}, 1, ["16"], "not out-of-memory"),
            ("rising", {}, 1, ["16"], "checks failed"),
            ("flat", {}, 1, ["16"], "checks failed"),
            ("nan", {}, 1, ["16"], "checks failed"),
            ("null", {}, 1, ["16"], "checks failed"),
            ("no_json", {}, 1, ["16"], "checks failed"),
            # The planner: 10 GB per sequence against 100 GB: 16 (160 GB) is never tried.
            ("good", {"BENCH_DEVICE_MEMORY_GB": "100"}, 0, ["8"], "ok: micro_batch 8"),
            ("oom_then_ok", {"BENCH_DEVICE_MEMORY_GB": "45"}, 0, ["4"], "ok: micro_batch 4"),
            # None predicted to fit: the smallest is tried all the same.
            ("good", {"BENCH_DEVICE_MEMORY_GB": "5"}, 0, ["4"], "ok: micro_batch 4"),
        ]
        for mode, extra, want_rc, want_tried, want_last in cases:
            label = mode + (f" (device {extra['BENCH_DEVICE_MEMORY_GB']} GB)" if extra else "")
            rc, tried, output, last = run(fake, dict(extra, FAKE_MODE=mode), tmp)
            ok = rc == want_rc and tried == want_tried and want_last in last
            check(ok, f"{label}: exit {rc} (want {want_rc}), benched {tried} (want {want_tried}), "
                      f"last line '{last}' (want '{want_last}')")
            if not ok:
                print(output)
        rc, tried, output, last = run(fake, {"FAKE_MODE": "good", "BENCH_MICRO_BATCHES": "8 x"}, tmp)
        check(rc == 2 and not tried and "BENCH_MICRO_BATCHES must be positive whole numbers" in output,
              f"bad micro-batch list: exit {rc} (want 2), benched {tried}, '{output.strip()}'")
        rc, _, output, last = run(fake, {"FAKE_MODE": "good", "BENCH_DEVICE_MEMORY_GB": "5"}, tmp)
        check("is predicted to fit 5 GB: trying 4" in output,
              "device 5 GB: the output says none was predicted to fit")
        rc, _, output, last = run(fake, {"FAKE_MODE": "error"}, tmp)
        check("cudaErrorIllegalAddress" in output, "error: the output shows the error")
        rc, _, output, last = run(fake, {"FAKE_MODE": "nan"}, tmp)
        check("non-finite loss" in output, "nan: the output names the non-finite loss")
        rc, _, output, last = run(fake, {"FAKE_MODE": "rising"}, tmp)
        check("not falling" in output, "rising: the output says the loss is not falling")

        # The real CPU binary at a tiny shape, the planner asked for real: the loss falls at
        # lr 0.01 over 9 steps (4.16 -> ~3.8 when this was written; ln 64 = 4.16 at the start).
        real = os.path.join(build, "ledgerlm")
        rc, _, output, last = run(real, {
            "BENCH_DEVICE": "cpu", "BENCH_MICRO_BATCHES": "8 4", "BENCH_STEPS": "4",
            "BENCH_WARMUP": "1", "BENCH_DEVICE_MEMORY_GB": "1000",
            "BENCH_SHAPE": "--model.n_layer 1 --model.n_head 2 --model.n_embd 32 "
                           "--model.block_size 64 --model.vocab_size 64 --train.seq_len 64 "
                           "--optim.lr 0.01"}, tmp)
        check(rc == 0 and "ok: micro_batch 8" in last and "predicted peak" in output,
              f"cpu binary, tiny shape: exit {rc}, last line '{last}'")
        if rc != 0:
            print(output)
    finish()


if __name__ == "__main__":
    main()
