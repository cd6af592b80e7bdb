"""Golden optimizer fixtures from the optimizer authors' own code (tests/reference/golden/).

What it generates: one safetensors file per case, each holding a tiny deterministic problem (four
float32 parameters, 6 steps of given gradients) and the authors' implementation's result:

  lion.safetensors                lion_pytorch.Lion
  adamw_schedulefree.safetensors  schedulefree.AdamWScheduleFree (the standard, foreach class)
  ademamix.safetensors            AdEMAMix from apple/ml-ademamix, pytorch/ademamix.py
  muon_bf16.safetensors           torch.optim.Muon on {a, b} + torch.optim.AdamW on {e, c}, stock
  muon_fp32.safetensors           the same with torch's Newton-Schulz run in float32 (see below)
  muon_rms.safetensors            muon_fp32 with adjust_lr_fn="match_rms_adamw"

The problem: torch.manual_seed(1234); then a (6, 10), b (12, 5), e (10, 4), c (7,) as
torch.randn(shape) * 0.5 in that order; then for s = 1..6 and p in a, b, e, c: torch.randn(shape)
is the gradient of p at step s (one seed stream). {a, b, e} get the case's weight decay, {c} none.

Tensors in each file (all F32):
  init.<p>            the initial weights
  grad.<s>.<p>        the gradient given at step s (s = 1..6), as given (before any optimizer
                      touched it: schedulefree divides p.grad in place)
  after1.<p>          p after step 1
  final.<p>           p after step 6 (Schedule-Free: y, the train-mode weights)
  x.<p>               Schedule-Free only: p after opt.eval() (x), taken after final
  state.<p>.<name>    optimizer state after step 6 under ledgerlm's names:
                      lion m; adamw_schedulefree z, v; ademamix m1, m2, nu;
                      muon: a, b momentum; e, c m, v (AdamW exp_avg, exp_avg_sq)
  __metadata__        case name, every hyper-parameter, package versions, per-step schedules

muon_fp32: torch.optim._muon._zeropower_via_newtonschulz casts its input with
`grad.to(dtype=torch.bfloat16, copy=True)` and runs the whole iteration (Frobenius normalisation,
5 quintic steps, transposes) in bfloat16. _zeropower_via_newtonschulz_fp32 below is the same code
with that one dtype changed to torch.float32; nothing else differs. The script checks this at run
time: the same body with dtype=torch.bfloat16 must reproduce torch's function bit for bit, and
torch's source must still contain exactly that one bfloat16 cast.

Generated with (also recorded in each file's metadata): python 3.11.7, torch 2.15.0+cu132 (run on
the CPU, one thread), numpy 2.4.6, schedulefree 1.4.1, lion-pytorch 0.2.5, and apple/ml-ademamix at
commit c3d73c09f1287e5c33b95189bb0aa7de0a5a7667 (pytorch/ademamix.py, sha256 in the metadata; no
package ships it, so the script imports it from a checkout given by --ademamix, default
/tmp/ml-ademamix/pytorch/ademamix.py). Two runs write byte-identical files.

Rerun (needs torch with torch.optim.Muon, i.e. >= 2.9, numpy, schedulefree, lion-pytorch):
  /work/venv-golden/bin/python tests/reference/gen_optim_golden.py tests/reference/golden

CI never runs this script: the committed fixtures are what the tests read. Files are written with
the repo's numpy writer (safetensors_io.py), so no safetensors package is needed.
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

SEED = 1234
STEPS = 6
SHAPES = {"a": (6, 10), "b": (12, 5), "e": (10, 4), "c": (7,)}
NAMES = list(SHAPES)  # a, b, e, c: the order of creation and of the gradient draws


def make_problem():
    torch.manual_seed(SEED)
    init = {n: torch.randn(SHAPES[n], dtype=torch.float32) * 0.5 for n in NAMES}
    grads = [{n: torch.randn(SHAPES[n], dtype=torch.float32) for n in NAMES}
             for _ in range(STEPS)]
    return init, grads


def versions():
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "numpy": np.__version__}
    for pkg in ("schedulefree", "lion-pytorch"):
        out[pkg] = importlib.metadata.version(pkg)
    return out


def to_np(t):
    return t.detach().to(torch.float32).contiguous().numpy().copy()


def run_case(init, grads, make_opt, state_map, on_step=None):
    """Runs STEPS steps. make_opt(params) -> list of optimizers (all stepped each step).
    state_map: p -> {our state name: (optimizer index, authors' state key)}."""
    params = {n: torch.nn.Parameter(init[n].clone()) for n in NAMES}
    opts = make_opt(params)
    after1 = None
    for s in range(STEPS):
        for n in NAMES:
            params[n].grad = grads[s][n].clone()  # a copy: some optimizers write into p.grad
        for opt in opts:
            opt.step()
        if on_step is not None:
            on_step(s + 1, opts)
        if s == 0:
            after1 = {n: to_np(params[n]) for n in NAMES}
    out = {}
    for n in NAMES:
        out[f"init.{n}"] = to_np(init[n])
    for s in range(STEPS):
        for n in NAMES:
            out[f"grad.{s + 1}.{n}"] = to_np(grads[s][n])
    for n in NAMES:
        out[f"after1.{n}"] = after1[n]
    for n in NAMES:
        out[f"final.{n}"] = to_np(params[n])
    for n in NAMES:
        for ours, (oi, theirs) in state_map[n].items():
            out[f"state.{n}.{ours}"] = to_np(opts[oi].state[params[n]][theirs])
    return out, params, opts


def groups(params, wd, **extra):
    return [dict(params=[params["a"], params["b"], params["e"]], weight_decay=wd, **extra),
            dict(params=[params["c"]], weight_decay=0.0, **extra)]


# ---------------------------------------------------------------- Lion

def case_lion(init, grads):
    from lion_pytorch import Lion
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.5)

    def make(params):
        return [Lion(groups(params, hp["weight_decay"]), lr=hp["lr"],
                     betas=(hp["beta1"], hp["beta2"]))]

    out, _, _ = run_case(init, grads, make, {n: {"m": (0, "exp_avg")} for n in NAMES})
    return out, hp, {"optimizer": "lion_pytorch.Lion (use_triton=False, "
                                  "decoupled_weight_decay=False)"}


# ---------------------------------------------------------------- Schedule-Free AdamW

def case_adamw_schedulefree(init, grads):
    from schedulefree import AdamWScheduleFree
    hp = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, warmup_steps=3,
              r=0.0, weight_lr_power=2.0)
    sched = {"scheduled_lr": [], "lr_max": [], "weight_sum": []}

    def make(params):
        opt = AdamWScheduleFree(groups(params, hp["weight_decay"]), lr=hp["lr"],
                                betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                                warmup_steps=hp["warmup_steps"], r=hp["r"],
                                weight_lr_power=hp["weight_lr_power"])
        opt.train()
        return [opt]

    def on_step(_s, opts):
        g = opts[0].param_groups[0]
        for k in sched:
            sched[k].append(repr(float(g[k])))

    out, params, opts = run_case(init, grads, make,
                                 {n: {"z": (0, "z"), "v": (0, "exp_avg_sq")} for n in NAMES},
                                 on_step)
    opts[0].eval()
    for n in NAMES:
        out[f"x.{n}"] = to_np(params[n])
    extra = {"optimizer": "schedulefree.AdamWScheduleFree (foreach="
                          f"{opts[0].param_groups[0]['foreach']}); train() before step 1, "
                          "final = y, x = after eval()"}
    extra.update({f"per_step.{k}": ",".join(v) for k, v in sched.items()})
    return out, hp, extra


# ---------------------------------------------------------------- AdEMAMix

def load_ademamix(path):
    spec = importlib.util.spec_from_file_location("apple_ml_ademamix", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def case_ademamix(init, grads, path):
    mod = load_ademamix(path)
    hp = dict(lr=1e-2, beta1=0.9, beta2=0.999, beta3=0.9999, alpha=5.0, alpha_warmup=4,
              beta3_warmup=4, eps=1e-8, weight_decay=0.1)

    def make(params):
        return [mod.AdEMAMix(groups(params, hp["weight_decay"]), lr=hp["lr"],
                             betas=(hp["beta1"], hp["beta2"], hp["beta3"]), alpha=hp["alpha"],
                             beta3_warmup=hp["beta3_warmup"], alpha_warmup=hp["alpha_warmup"],
                             eps=hp["eps"])]

    out, _, _ = run_case(init, grads, make,
                         {n: {"m1": (0, "exp_avg_fast"), "m2": (0, "exp_avg_slow"),
                              "nu": (0, "exp_avg_sq")} for n in NAMES})
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    steps = range(1, STEPS + 1)
    extra = {
        "optimizer": "AdEMAMix from apple/ml-ademamix pytorch/ademamix.py",
        "ademamix_source_sha256": sha,
        # the schedules as the authors' own functions compute them, step t = 1..6
        "per_step.alpha": ",".join(repr(mod.linear_warmup_scheduler(
            t, alpha_end=hp["alpha"], alpha_start=0, warmup=hp["alpha_warmup"])) for t in steps),
        "per_step.beta3": ",".join(repr(mod.linear_hl_warmup_scheduler(
            t, beta_end=hp["beta3"], beta_start=hp["beta1"], warmup=hp["beta3_warmup"]))
            for t in steps),
    }
    return out, hp, extra


# ---------------------------------------------------------------- Muon (+ AdamW)

def _zeropower_via_newtonschulz_dtype(grad, ns_coefficients, ns_steps, eps, dtype):
    """torch.optim._muon._zeropower_via_newtonschulz (torch 2.15.0) with the working dtype a
    parameter: torch hard-codes dtype=torch.bfloat16 in the first cast; every other line is the
    same (argument checks, transpose when rows > cols, division by the Frobenius norm clamped
    below at eps, ns_steps quintic steps via addmm, transpose back)."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    ortho_grad = grad.to(dtype=dtype, copy=True)  # torch: dtype=torch.bfloat16
    if grad.size(0) > grad.size(1):
        ortho_grad = ortho_grad.T
    ortho_grad.div_(ortho_grad.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram_matrix = ortho_grad @ ortho_grad.T
        gram_update = torch.addmm(gram_matrix, gram_matrix, gram_matrix, beta=b, alpha=c)
        ortho_grad = torch.addmm(ortho_grad, gram_update, ortho_grad, beta=a)
    if grad.size(0) > grad.size(1):
        ortho_grad = ortho_grad.T
    return ortho_grad


def _zeropower_via_newtonschulz_fp32(grad, ns_coefficients, ns_steps, eps):
    return _zeropower_via_newtonschulz_dtype(grad, ns_coefficients, ns_steps, eps, torch.float32)


def check_ns_equivalence():
    """The float32 replacement must be torch's function but for the dtype."""
    import torch.optim._muon as muon_mod
    src = inspect.getsource(muon_mod._zeropower_via_newtonschulz)
    assert src.count("torch.bfloat16") == 1 and \
        "grad.to(dtype=torch.bfloat16, copy=True)" in src, \
        "torch's Newton-Schulz changed: re-read torch/optim/_muon.py before trusting muon_fp32"
    gen = torch.Generator().manual_seed(7)
    for shape in ((6, 10), (12, 5), (5, 5)):
        g = torch.randn(shape, generator=gen)
        args = (muon_mod.DEFAULT_A, muon_mod.DEFAULT_B, muon_mod.DEFAULT_C), 5, muon_mod.EPS
        ref = muon_mod._zeropower_via_newtonschulz(g, *args)
        ours = _zeropower_via_newtonschulz_dtype(g, *args, torch.bfloat16)
        assert ref.dtype == ours.dtype and torch.equal(ref, ours), shape


def case_muon(init, grads, ns_fp32, adjust_lr_fn):
    import torch.optim._muon as muon_mod
    hp = dict(muon_lr=0.02, muon_weight_decay=0.1, muon_momentum=0.95, muon_nesterov=True,
              muon_ns_steps=5,
              muon_ns_coefficients=(muon_mod.DEFAULT_A, muon_mod.DEFAULT_B, muon_mod.DEFAULT_C),
              muon_eps=muon_mod.EPS, muon_adjust_lr_fn=adjust_lr_fn or "None (original)",
              muon_ns_dtype="float32" if ns_fp32 else "bfloat16",
              adamw_lr=3e-3, adamw_beta1=0.9, adamw_beta2=0.95, adamw_eps=1e-8,
              adamw_weight_decay_e=0.1, adamw_weight_decay_c=0.0)

    def make(params):
        muon = torch.optim.Muon([params["a"], params["b"]], lr=hp["muon_lr"],
                                weight_decay=hp["muon_weight_decay"],
                                momentum=hp["muon_momentum"], nesterov=hp["muon_nesterov"],
                                ns_coefficients=hp["muon_ns_coefficients"], eps=hp["muon_eps"],
                                ns_steps=hp["muon_ns_steps"], adjust_lr_fn=adjust_lr_fn)
        adamw = torch.optim.AdamW(
            [dict(params=[params["e"]], weight_decay=hp["adamw_weight_decay_e"]),
             dict(params=[params["c"]], weight_decay=hp["adamw_weight_decay_c"])],
            lr=hp["adamw_lr"], betas=(hp["adamw_beta1"], hp["adamw_beta2"]), eps=hp["adamw_eps"],
            foreach=False)  # what torch picks by default for CPU tensors anyway
        return [muon, adamw]

    state_map = {"a": {"momentum": (0, "momentum_buffer")},
                 "b": {"momentum": (0, "momentum_buffer")},
                 "e": {"m": (1, "exp_avg"), "v": (1, "exp_avg_sq")},
                 "c": {"m": (1, "exp_avg"), "v": (1, "exp_avg_sq")}}
    stock = muon_mod._zeropower_via_newtonschulz
    if ns_fp32:
        muon_mod._zeropower_via_newtonschulz = _zeropower_via_newtonschulz_fp32
    try:
        out, _, _ = run_case(init, grads, make, state_map)
    finally:
        muon_mod._zeropower_via_newtonschulz = stock
    extra = {"optimizer": "torch.optim.Muon on a, b + torch.optim.AdamW on e, c; both stepped "
                          "each step, Muon first",
             "adamw_foreach": "False (single-tensor path)",
             "muon_ns_patch": ("torch.optim._muon._zeropower_via_newtonschulz replaced by the "
                               "same iteration in float32" if ns_fp32 else "none (stock torch)")}
    return out, hp, extra


# ---------------------------------------------------------------- main

def hp_str(val):
    """Metadata text of a hyper-parameter: floats as repr (round-trips), tuples comma-joined."""
    if isinstance(val, tuple):
        return ",".join(hp_str(v) for v in val)
    if isinstance(val, str):
        return val
    return repr(val)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--ademamix", default="/tmp/ml-ademamix/pytorch/ademamix.py",
                    help="path to pytorch/ademamix.py of a checkout of apple/ml-ademamix")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(args.outdir, exist_ok=True)
    check_ns_equivalence()

    init, grads = make_problem()
    vers = versions()
    cases = {
        "lion": lambda: case_lion(init, grads),
        "adamw_schedulefree": lambda: case_adamw_schedulefree(init, grads),
        "ademamix": lambda: case_ademamix(init, grads, args.ademamix),
        "muon_bf16": lambda: case_muon(init, grads, ns_fp32=False, adjust_lr_fn=None),
        "muon_fp32": lambda: case_muon(init, grads, ns_fp32=True, adjust_lr_fn=None),
        "muon_rms": lambda: case_muon(init, grads, ns_fp32=True, adjust_lr_fn="match_rms_adamw"),
    }
    for name, fn in cases.items():
        out, hp, extra = fn()
        meta = {"case": name, "seed": str(SEED), "steps": str(STEPS),
                "params": ",".join(f"{n}{list(SHAPES[n])}" for n in NAMES),
                "init": "torch.manual_seed(seed); randn(shape)*0.5 for a, b, e, c; then "
                        "randn(shape) per step per param in that order",
                "groups": "a, b, e: the case's weight decay; c: weight decay 0"}
        meta.update({f"hp.{k}": hp_str(val) for k, val in hp.items()})
        meta.update(extra)
        meta.update({f"version.{k}": v for k, v in vers.items()})
        path = os.path.join(args.outdir, f"{name}.safetensors")
        safetensors_io.write(path, out, metadata=meta)
        moved = max(float(np.abs(out[f"final.{n}"] - out[f"init.{n}"]).max()) for n in NAMES)
        print(f"{path}: {len(out)} tensors, {os.path.getsize(path)} bytes, "
              f"max|final-init| {moved:.6g}")
    print("versions:", vers)


if __name__ == "__main__":
    main()
