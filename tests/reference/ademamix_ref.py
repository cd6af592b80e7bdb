"""AdEMAMix as apple/ml-ademamix's pytorch/ademamix.py computes it, for
tests/reference/test_reference_ademamix_trajectory.cpp: a long run (hundreds of steps, alpha and
beta3 warmed up over the whole run) that the six-step golden fixture cannot cover.

The class below transcribes the authors' step: per tensor, step += 1; alpha linear from 0 and
beta3 by a half-life linear from beta1's (their linear_warmup_scheduler and
linear_hl_warmup_scheduler); m1 = b1 m1 + (1-b1) g, m2 = b3 m2 + (1-b3) g, nu = b2 nu + (1-b2) g^2;
u = (m1/bc1 + alpha m2) / (sqrt(nu)/sqrt(bc2) + eps) + wd p; p -= lr u. No ledgerlm code is used.

Usage: ademamix_ref.py DIR. DIR is an optim_case.py case; its settings add beta1, beta2, beta3,
alpha, warmup, eps.
Writes w.bin (the weights after the last step) and m1.bin, m2.bin, nu.bin (the state), float32.
"""
import math
import sys

import torch

from optim_case import Case


def linear_warmup(step, end, start, warmup):
    if step < warmup:
        a = step / float(warmup)
        return (1.0 - a) * start + a * end
    return end


def half_life_warmup(step, end, start, warmup):
    def half_life(beta, eps=1e-8):
        return math.log(0.5) / math.log(beta + eps) - 1

    def beta_of(t):
        return math.pow(0.5, 1 / (t + 1))

    if step < warmup:
        a = step / float(warmup)
        return beta_of((1.0 - a) * half_life(start) + a * half_life(end))
    return end


class AdEMAMix(torch.optim.Optimizer):
    def __init__(self, params, lr, betas, alpha, warmup, eps):
        super().__init__(params, dict(lr=lr, betas=betas, alpha=alpha, warmup=warmup, eps=eps,
                                      weight_decay=0.0))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, lmbda, eps = group["lr"], group["weight_decay"], group["eps"]
            beta1, beta2, beta3_final = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m1"] = torch.zeros_like(p)
                    state["m2"] = torch.zeros_like(p)
                    state["nu"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                bc1 = 1 - beta1 ** t
                bc2 = 1 - beta2 ** t
                alpha = linear_warmup(t, group["alpha"], 0, group["warmup"])
                beta3 = half_life_warmup(t, beta3_final, beta1, group["warmup"])
                m1, m2, nu = state["m1"], state["m2"], state["nu"]
                m1.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                m2.mul_(beta3).add_(p.grad, alpha=1 - beta3)
                nu.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (nu.sqrt() / math.sqrt(bc2)).add_(eps)
                update = (m1.div(bc1) + alpha * m2) / denom
                update.add_(p, alpha=lmbda)
                p.add_(-lr * update)


def run(d):
    case = Case(d)
    kv = case.settings
    opt = AdEMAMix(case.groups(), lr=case.lrs[0],
                   betas=(float(kv["beta1"]), float(kv["beta2"]), float(kv["beta3"])),
                   alpha=float(kv["alpha"]), warmup=int(kv["warmup"]), eps=float(kv["eps"]))
    case.replay(opt)
    case.write("w", case.params)
    for name in ("m1", "m2", "nu"):
        case.write(name, [opt.state[p][name] for p in case.params])


if __name__ == "__main__":
    torch.set_num_threads(1)
    run(sys.argv[1])
