"""PyTorch DDP peer of `mpirun -np N ledgerlm train`: the same GPT-2 shape trained with
torch.nn.parallel.DistributedDataParallel over gloo (Debian's torch), random tokens,
torch.optim.AdamW, fp32, one thread per process. Starts its --world processes itself
(torch.multiprocessing on one host; Debian's torch.distributed.run launcher fails on its
Python 3.11), each with the gloo rendezvous on a local port.

Rank 0 writes --out as JSON: tokens/s per step (global batch), step ms, peak RSS per rank.
"""

import argparse
import json
import resource
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fc_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (y.view(shape).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (k.shape[-1] ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, heads, c, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def worker(rank, a):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank,
                            world_size=a.world)
    world = a.world
    torch.manual_seed(1234)
    model = nn.parallel.DistributedDataParallel(Gpt(a.layers, a.heads, a.embd, a.seq, a.vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    times = []
    for _ in range(a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=gen)
        t0 = time.perf_counter()
        loss = model(tokens[:, :-1], tokens[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0])
    all_rss = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        timed = times[2:] if len(times) > 3 else times
        tokens_per_step = world * a.batch * a.seq
        tps = [tokens_per_step / t for t in timed]
        json.dump({"world": world, "tokens_per_s": statistics.median(tps),
                   "tokens_per_s_min": min(tps), "tokens_per_s_max": max(tps),
                   "step_ms": 1e3 * statistics.median(timed),
                   "peak_rss_bytes": [float(x.item()) for x in all_rss],
                   "torch": torch.__version__}, open(a.out, "w"))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for name in ("world", "layers", "heads", "embd", "seq", "batch", "vocab", "steps"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.multiprocessing.spawn(worker, args=(a,), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
