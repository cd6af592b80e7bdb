"""Times PyTorch training steps of a GPT-2 on random tokens, in one of two standard forms.

Used by scripts/bench/bench_vs_torch.sh for the side-by-side comparison with `ledgerlm bench`: the same
architecture (tied LM head, pre-LayerNorm, tanh GELU), random tokens, torch.optim.AdamW, fp32.
  --model module      an nn.Module GPT as users write it: nn.Embedding, nn.LayerNorm, nn.Linear
                      (bias fused into addmm), nn.GELU(approximate="tanh") (ledgerlm's GELU),
                      manual causal attention, F.cross_entropy; the LM head tied to wte
  --model functional  the reference model of tests/reference/gpt_ref.py (plain tensor ops)
  --foreach           torch.optim.AdamW(foreach=True) (the multi-tensor update) instead of the
                      per-tensor loop
Prints one line `torch_json {...}` with the median/min/max tokens/s over the timed steps, the
peak RSS of this process and the BLAS torch was built with.

usage: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 \
       bench_torch_step.py --layers 4 --heads 4 --embd 128 --seq 64 --batch 12 --vocab 65 \
       [--model module|functional] [--foreach]
"""

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "reference"))
import gpt_ref  # noqa: E402


def make_weights(cfg, generator):
    """GPT-2 style init (normal 0.02, zero biases, unit LayerNorm) in HF names and layout."""
    C, V, L, T = cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"], cfg["n_positions"]

    def normal(*shape):
        return torch.randn(*shape, generator=generator) * 0.02

    w = {
        "transformer.wte.weight": normal(V, C),
        "transformer.wpe.weight": normal(T, C),
        "transformer.ln_f.weight": torch.ones(C),
        "transformer.ln_f.bias": torch.zeros(C),
    }
    for layer in range(L):
        p = f"transformer.h.{layer}."
        w.update({
            p + "ln_1.weight": torch.ones(C), p + "ln_1.bias": torch.zeros(C),
            p + "attn.c_attn.weight": normal(C, 3 * C), p + "attn.c_attn.bias": torch.zeros(3 * C),
            p + "attn.c_proj.weight": normal(C, C), p + "attn.c_proj.bias": torch.zeros(C),
            p + "ln_2.weight": torch.ones(C), p + "ln_2.bias": torch.zeros(C),
            p + "mlp.c_fc.weight": normal(C, 4 * C), p + "mlp.c_fc.bias": torch.zeros(4 * C),
            p + "mlp.c_proj.weight": normal(4 * C, C), p + "mlp.c_proj.bias": torch.zeros(C),
        })
    for t in w.values():
        t.requires_grad_(True)
    return w


class Block(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.n_head = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = nn.GELU(approximate="tanh")
        self.mlp_proj = nn.Linear(4 * C, C)
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril())

    def forward(self, x):
        B, T, C = x.shape
        H, hd = self.n_head, C // self.n_head
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, V, T = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, cfg["n_head"], T) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(C)
        for m in self.modules():  # GPT-2 init: normal 0.02, zero biases, unit LayerNorm
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def cpu_capability():
    """The vector ISA ATen's kernels dispatch to (ATEN_CPU_CAPABILITY caps it)."""
    config = torch.__config__.show()
    key = "CPU capability usage: "
    return config.split(key, 1)[1].split("\n", 1)[0].strip() if key in config else "unknown"


def blas_name():
    config = torch.__config__.show()
    for key in ("BLAS_INFO=", "LAPACK_INFO="):
        if key in config:
            return config.split(key, 1)[1].split(",", 1)[0].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--embd", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", choices=("module", "functional"), default="module")
    ap.add_argument("--foreach", action="store_true", help="AdamW(foreach=True)")
    args = ap.parse_args()

    cfg = {"n_layer": args.layers, "n_head": args.heads, "n_embd": args.embd,
           "n_positions": args.seq, "vocab_size": args.vocab, "layer_norm_epsilon": 1e-5}
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    if args.model == "module":
        model = GPT(cfg)
        params = list(model.parameters())

        def step_loss(inputs, targets):
            return model(inputs, targets)
    else:
        weights = make_weights(cfg, gen)
        params = list(weights.values())

        def step_loss(inputs, targets):
            return gpt_ref.cross_entropy_mean(gpt_ref.gpt_logits(weights, cfg, inputs), targets)
    opt = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=args.foreach)
    n_params = sum(t.numel() for t in params)

    step_s = []
    for step in range(args.warmup + args.steps):
        data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
        inputs, targets = data[:, :-1], data[:, 1:]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_loss(inputs, targets)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            step_s.append(dt)

    tokens = args.batch * args.seq
    tps = [tokens / s for s in step_s]
    out = {
        "tokens_per_s": tokens / statistics.median(step_s),
        "tokens_per_s_min": min(tps),
        "tokens_per_s_max": max(tps),
        "step_ms": 1e3 * statistics.median(step_s),
        "params": n_params,
        "loss": float(loss),
        # ru_maxrss is in KiB on Linux.
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "threads": torch.get_num_threads(),
        "blas": blas_name(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "model": args.model,
        "foreach": args.foreach,
        "cpu_capability": cpu_capability(),
    }
    print("torch_json " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
