"""torch.optim reference for tests/unit/optim/test_optim_torch.cpp.

Usage: optim_ref.py DIR [DIR...] (one run per DIR, so torch is imported once). DIR holds spec.txt, w0.bin and grads.bin written by the test:
  spec.txt line 1: key=value settings (opt=sgd|adamw, momentum, nesterov, beta1, beta2, eps,
                   steps, lrs=comma-separated per-step LR)
  spec.txt other lines: one per tensor: "numel lr_mult weight_decay"
  w0.bin: float32 initial weights, tensors concatenated; grads.bin: steps x the same layout.
Runs torch.optim.SGD / AdamW in float32, one param group per tensor, and writes w.bin.
"""
import os
import sys

import numpy as np
import torch


def run(d):
    with open(os.path.join(d, "spec.txt")) as f:
        lines = [line.split() for line in f if line.strip()]
    kv = dict(item.split("=", 1) for item in lines[0])
    tensors = [(int(a), float(b), float(c)) for a, b, c in lines[1:]]
    total = sum(t[0] for t in tensors)
    steps = int(kv["steps"])
    lrs = [float(x) for x in kv["lrs"].split(",")]
    w0 = np.fromfile(os.path.join(d, "w0.bin"), dtype=np.float32)
    grads = np.fromfile(os.path.join(d, "grads.bin"), dtype=np.float32).reshape(steps, total)
    assert w0.size == total

    params, offsets, off = [], [], 0
    for numel, _, _ in tensors:
        params.append(torch.nn.Parameter(torch.from_numpy(w0[off:off + numel].copy())))
        offsets.append(off)
        off += numel
    groups = [{"params": [p], "lr": lrs[0] * mult, "weight_decay": wd, "mult": mult}
              for p, (_, mult, wd) in zip(params, tensors)]
    if kv["opt"] == "sgd":
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=float(kv["momentum"]),
                              nesterov=kv["nesterov"] == "1")
    elif kv["opt"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=lrs[0], betas=(float(kv["beta1"]), float(kv["beta2"])),
                                eps=float(kv["eps"]))
    else:
        raise SystemExit("unknown opt " + kv["opt"])
    for s in range(steps):
        for g in opt.param_groups:
            g["lr"] = lrs[s] * g["mult"]
        for p, o in zip(params, offsets):
            p.grad = torch.from_numpy(grads[s, o:o + p.numel()].copy())
        opt.step()
    out = np.concatenate([p.detach().numpy() for p in params]).astype(np.float32)
    out.tofile(os.path.join(d, "w.bin"))


if __name__ == "__main__":
    torch.set_num_threads(2)
    for case_dir in sys.argv[1:]:
        run(case_dir)
