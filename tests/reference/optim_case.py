"""The case directory the optimizer reference tests hand to a PyTorch script, read and replayed.

DIR holds spec.txt, w0.bin and grads.bin, written by the C++ test:
  spec.txt line 1: key=value settings (steps, lrs = comma-separated per-step LR, and the
                   optimizer's own keys, read by the script)
  spec.txt other lines: one per tensor: "numel lr_mult weight_decay"
  w0.bin: float32 initial weights, tensors concatenated; grads.bin: steps x the same layout.
"""
import os

import numpy as np
import torch

# ledgerlm's default precision.subnormals = flush: FTZ/DAZ before any tensor op, so that the
# threads torch starts later inherit it (torch sets the calling thread only). optim_ref.py and
# ademamix_ref.py import this module before any tensor op.
torch.set_flush_denormal(True)


class Case:
    def __init__(self, d):
        self.dir = d
        with open(os.path.join(d, "spec.txt")) as f:
            lines = [line.split() for line in f if line.strip()]
        self.settings = dict(item.split("=", 1) for item in lines[0])
        self.tensors = [(int(a), float(b), float(c)) for a, b, c in lines[1:]]
        total = sum(t[0] for t in self.tensors)
        self.steps = int(self.settings["steps"])
        self.lrs = [float(x) for x in self.settings["lrs"].split(",")]
        w0 = np.fromfile(os.path.join(d, "w0.bin"), dtype=np.float32)
        self.grads = np.fromfile(os.path.join(d, "grads.bin"),
                                 dtype=np.float32).reshape(self.steps, total)
        assert w0.size == total and len(self.lrs) == self.steps
        self.params, self.offsets, off = [], [], 0
        for numel, _, _ in self.tensors:
            self.params.append(torch.nn.Parameter(torch.from_numpy(w0[off:off + numel].copy())))
            self.offsets.append(off)
            off += numel

    def groups(self):
        """One param group per tensor, with its LR multiplier ("mult") and weight decay."""
        return [{"params": [p], "lr": self.lrs[0] * mult, "weight_decay": wd, "mult": mult}
                for p, (_, mult, wd) in zip(self.params, self.tensors)]

    def replay(self, opt):
        """Every step: the scheduled LR times each group's multiplier, the recorded gradients."""
        for s in range(self.steps):
            for g in opt.param_groups:
                g["lr"] = self.lrs[s] * g["mult"]
            for p, o in zip(self.params, self.offsets):
                p.grad = torch.from_numpy(self.grads[s, o:o + p.numel()].copy())
            opt.step()

    def write(self, name, tensors):
        """The tensors concatenated in table order as DIR/name.bin (float32)."""
        out = np.concatenate([t.detach().numpy() for t in tensors]).astype(np.float32)
        out.tofile(os.path.join(self.dir, name + ".bin"))
