#!/usr/bin/env python3
"""`ledgerlm bench`'s two ways of counting steps, on the CPU binary at a tiny shape:
- the CPU path: warmup + steps steps, each profiled; losses for all of them, MFU against the
  measured CPU peak, no "gpu" record;
- the GPU path (taken on the CPU through the test hook LEDGERLM_TEST_BENCH_GPU_PATH=N, N the
  size of the measured GEMM): warmup + steps unprofiled steps, then `steps` profiled ones for the
  op split; losses for all, the first warmup + steps bitwise those of the CPU path (the same ops
  on the same data in the same order, one thread, a constant LR: the schedule spans all the
  steps, more on this path), the op table's calls per step the CPU
  path's, a device not in the peak table reported as such with no datasheet MFU (null), and the
  measured GEMM rates present.

  test_bench_report.py BUILD_DIR

About 2 s.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

SHAPE = ["--train.device", "cpu", "--train.threads", "1", "--model.n_layer", "1",
         "--model.n_head", "2", "--model.n_embd", "32", "--model.block_size", "64",
         "--model.vocab_size", "64", "--train.seq_len", "64", "--train.micro_batch", "4",
         "--optim.schedule", "constant", "--steps", "3", "--warmup", "1"]


def bench(binary, extra_env):
    env = dict(os.environ)
    env.pop("LEDGERLM_TEST_BENCH_GPU_PATH", None)
    env.pop("LEDGERLM_TEST_GUARD_BACKEND", None)
    env.update(extra_env)
    p = subprocess.run([binary, "bench", *SHAPE], env=env, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    if p.returncode != 0:
        print(p.stdout)
    rec = None
    calls = {}
    for line in p.stdout.splitlines():
        if line.startswith("bench_json "):
            rec = json.loads(line[len("bench_json "):])
        parts = line.split()
        # the op table: name, ms/step, share, calls per step
        if len(parts) == 4 and parts[2].endswith("%") and parts[3].isdigit():
            calls[parts[0]] = int(parts[3])
    return p.returncode, p.stdout, rec or {}, calls


def main():
    binary = os.path.join(sys.argv[1], "ledgerlm")
    rc, out, cpu, cpu_calls = bench(binary, {})
    check(rc == 0, f"cpu path: exit {rc}")
    check(len(cpu.get("losses", [])) == 4, f"cpu path: 1 + 3 losses: {cpu.get('losses')}")
    check("gpu" not in cpu and (cpu.get("mfu") or 0) > 0, "cpu path: MFU against the CPU peak")
    check("split from the profiled steps" not in out, "cpu path: one set of steps")

    rc, out, gpu, gpu_calls = bench(binary, {"LEDGERLM_TEST_BENCH_GPU_PATH": "64"})
    check(rc == 0, f"gpu path: exit {rc}")
    losses = gpu.get("losses", [])
    check(len(losses) == 1 + 3 + 3, f"gpu path: 1 + 3 timed + 3 profiled losses: {losses}")
    check(losses[:4] == cpu.get("losses"), "gpu path: the timed steps' losses are the cpu path's")
    check(gpu_calls == cpu_calls and gpu_calls.get("gemm", 0) > 0,
          f"gpu path: op calls per step as on the cpu path: {gpu_calls} vs {cpu_calls}")
    check("split from the profiled steps" in out, "gpu path: the split is from the profiled steps")
    check("not in the peak table" in out and gpu.get("mfu", "absent") is None,
          "gpu path: an unnamed device gets no datasheet MFU")
    g = gpu.get("gpu", {})
    check(g.get("gemm_bf16_tflops", 0) > 0 and g.get("gemm_matmul_tflops", 0) > 0
          and g.get("mfu_vs_measured_gemm", 0) > 0 and "measured GEMM 64^3" in out,
          f"gpu path: the measured GEMM rates and the MFU against them: {g}")
    finish()


if __name__ == "__main__":
    main()
