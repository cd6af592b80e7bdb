"""Independent PyTorch GPT-2 reference, in Hugging Face GPT-2 tensor layout.

Written from the architecture description, not from ledgerlm's code, so the C++ model can be
checked against it (tests/reference/test_reference_gpt.cpp):
  token embedding wte (V, C) + learned position embedding wpe (T_max, C);
  L pre-LayerNorm blocks:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x));
    attn: qkv = x @ c_attn.weight (C, 3C) + bias, split q | k | v along the output dim, H heads,
          causal softmax(q k^T / sqrt(head_dim)) v, then @ c_proj.weight (C, C) + bias;
    mlp:  gelu_tanh(x @ c_fc.weight (C, F) + bias) @ c_proj.weight (F, C) + bias, F = n_inner
          (null: 4C);
  ln_f; logits = h @ wte^T (LM head tied to wte, real vocab only);
  loss = mean over tokens of softmax cross-entropy.
Block variants beyond HF GPT-2, read from extra config.json keys (ledgerlm's test writes them):
  "ledgerlm_mlp": "swiglu": mlp = (silu(x @ gate_proj.weight + b) * (x @ c_fc.weight + b))
    @ c_proj.weight + b (Shazeer 2020; silu(g) = g * sigmoid(g); c_fc is "up", c_proj "down",
    all three Conv1D layout (in, out));  "relu2": mlp = relu(x @ c_fc.weight + b)^2 @ c_proj ...;
  "tie_word_embeddings": false: logits = h @ lm_head.weight^T, lm_head.weight (V, C) its own;
  "ledgerlm_logit_softcap": cap > 0: logits = cap * tanh(logits / cap) before the loss.
LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias with the biased variance, eps from
config.json (1e-5). Only plain tensor ops are used.

Attention variants (ledgerlm's model.position = rope, n_kv_head, qk_norm), read from extra
config.json keys "ledgerlm_position" ("learned" | "rope"), "rope_theta", "n_kv_head" (0: n_head),
"qk_norm" and "qk_norm_eps":
  rope: no wpe; q and k of each head rotated by angle pos * theta^(-2i/hd) in the Hugging Face
        Llama convention (rotate_half: element i pairs with i + hd/2), or with --rope-interleaved
        the GPT-J / original RoFormer convention (element 2i pairs with 2i + 1); angles in float64,
        cos and sin rounded once to the compute dtype;
  n_kv_head KV < H: c_attn's output is q (C) | k (KV*hd) | v (KV*hd), query head h uses kv head
        h // (H / KV) (grouped-query attention);
  qk_norm: q and k of each head divided by sqrt(mean over head_dim of their squares + eps), no
        weight, before the rotation.
Block variants (model.norm etc.), read from config.json keys HF GPT-2 does not have:
  "norm": "layernorm" | "rmsnorm" (RMSNorm: x / sqrt(mean(x^2) + eps) * weight, no bias);
  "norm_weight": false drops the norms' weight (multiply by nothing);
  "bias": false drops every Conv1D bias and the LayerNorms' bias; "qkv_bias": true keeps
  c_attn's bias regardless (Qwen2). Missing tensors are simply absent from the weights file.

Inputs: --config (HF config.json), --weights (safetensors, HF names), --batch (safetensors with
I32 "tokens" [B, T] and optionally "targets" [B, T]).
Outputs (--out, safetensors): "loss" (F64 scalar) and, unless --no-grads, the gradient of the
mean loss w.r.t. every weight under its HF name, in the compute dtype (--dtype float32|float64).
The tied wte gradient includes the LM head's contribution. With --logits, also "logits" [B, T, V].

Low-rank adapters (LoRA, Hu et al. 2021): with --lora-scale S the weights file may also hold, for
any Conv1D layer NAME (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj), "NAME.lora_A.weight"
(r, in) and "NAME.lora_B.weight" (out, r), PEFT's layout; the layer is then
y = x @ W + b + S * (x @ A^T) @ B^T, and their gradients are written too. Separate adapters on
q, k and v (Llama's q_proj, k_proj, v_proj, which GPT-2 fuses into c_attn) are read under
"attn.q_proj", "attn.k_proj", "attn.v_proj" (A (r, C), B (C or KV*hd, r)): each adds
S * (x @ A^T) @ B^T to its part of c_attn's output; "mlp.gate_proj" takes one like any layer.

usage: OMP_NUM_THREADS=2 /usr/bin/python3 gpt_ref.py --config C --weights W --batch B --out O
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

# ledgerlm's default precision.subnormals = flush: FTZ/DAZ before any tensor op, so that the
# threads torch starts later inherit it (torch sets the calling thread only).
torch.set_flush_denormal(True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


NORM = "layernorm"


def layer_norm(x, weight, bias, eps):
    """The configured norm; weight or bias None where the model has none."""
    if NORM == "rmsnorm":
        y = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    else:
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


LORA_SCALE = 0.0


def conv1d(x, w, name):
    """GPT-2's Conv1D y = x @ W + b, plus the layer's adapter when the weights hold one."""
    y = x @ w[name + ".weight"]
    if name + ".bias" in w:
        y = y + w[name + ".bias"]
    if name + ".lora_A.weight" in w:
        y = y + LORA_SCALE * (x @ w[name + ".lora_A.weight"].T) @ w[name + ".lora_B.weight"].T
    return y


def separate_adapter(x, w, name):
    """Llama's own adapter on q, k or v (a part of c_attn's output), or 0 without one."""
    if name + ".lora_A.weight" not in w:
        return 0.0
    return LORA_SCALE * (x @ w[name + ".lora_A.weight"].T) @ w[name + ".lora_B.weight"].T


ATTN = {"rope": False, "theta": 10000.0, "kv": 0, "qk_norm": False, "eps": 1e-6,
        "interleaved": False}


def rope_rotate(t, theta, interleaved):
    """t: (B, heads, T, hd), rotated by position (its index along T)."""
    T, hd = t.shape[2], t.shape[3]
    pos = torch.arange(T, dtype=torch.float64).reshape(T, 1)
    inv_freq = theta ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
    ang = pos * inv_freq  # (T, hd/2)
    cos, sin = torch.cos(ang).to(t.dtype), torch.sin(ang).to(t.dtype)
    if interleaved:  # pairs (2i, 2i+1)
        a, b = t[..., 0::2], t[..., 1::2]
        ra, rb = a * cos - b * sin, b * cos + a * sin
        return torch.stack((ra, rb), dim=-1).reshape(t.shape)
    a, b = t[..., : hd // 2], t[..., hd // 2 :]  # Llama's rotate_half pairs (i, i + hd/2)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def attention(x, w, prefix, n_head):
    B, T, C = x.shape
    hd = C // n_head
    kv = ATTN["kv"] or n_head
    qkv = conv1d(x, w, prefix + "c_attn")  # (B, T, C + 2 KV hd)
    q, k, v = qkv[..., :C], qkv[..., C : C + kv * hd], qkv[..., C + kv * hd :]
    q, k, v = (part + separate_adapter(x, w, prefix + name + "_proj")
               for part, name in ((q, "q"), (k, "k"), (v, "v")))

    def heads(t, n):  # (B, T, n hd) -> (B, n, T, hd)
        return t.reshape(B, T, n, hd).transpose(1, 2)

    q, k, v = heads(q, n_head), heads(k, kv), heads(v, kv)
    if ATTN["qk_norm"]:
        q = q / torch.sqrt((q * q).mean(dim=-1, keepdim=True) + ATTN["eps"])
        k = k / torch.sqrt((k * k).mean(dim=-1, keepdim=True) + ATTN["eps"])
    if ATTN["rope"]:
        q = rope_rotate(q, ATTN["theta"], ATTN["interleaved"])
        k = rope_rotate(k, ATTN["theta"], ATTN["interleaved"])
    if kv != n_head:  # query head h reads kv head h // (H / KV)
        k = k.repeat_interleave(n_head // kv, dim=1)
        v = v.repeat_interleave(n_head // kv, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    y = (probs @ v).transpose(1, 2).reshape(B, T, C)
    return conv1d(y, w, prefix + "c_proj")


MLP = "gelu"


def mlp(x, w, prefix):
    if MLP == "swiglu":
        gate = conv1d(x, w, prefix + "gate_proj")
        h = gate * torch.sigmoid(gate) * conv1d(x, w, prefix + "c_fc")
    elif MLP == "relu2":
        h = torch.relu(conv1d(x, w, prefix + "c_fc")) ** 2
    else:
        h = gelu_tanh(conv1d(x, w, prefix + "c_fc"))
    return conv1d(h, w, prefix + "c_proj")


def gpt_logits(w, cfg, tokens):
    """tokens: int64 (B, T) -> logits (B, T, V)."""
    eps = float(cfg.get("layer_norm_epsilon", 1e-5))
    n_head = int(cfg["n_head"])
    T = tokens.shape[1]
    x = w["transformer.wte.weight"][tokens]
    if not ATTN["rope"]:
        x = x + w["transformer.wpe.weight"][:T]
    for layer in range(int(cfg["n_layer"])):
        p = f"transformer.h.{layer}."
        x = x + attention(layer_norm(x, w.get(p + "ln_1.weight"), w.get(p + "ln_1.bias"), eps),
                          w, p + "attn.", n_head)
        x = x + mlp(layer_norm(x, w.get(p + "ln_2.weight"), w.get(p + "ln_2.bias"), eps), w,
                    p + "mlp.")
    x = layer_norm(x, w.get("transformer.ln_f.weight"), w.get("transformer.ln_f.bias"), eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["transformer.wte.weight"]
    logits = x @ head.T
    cap = float(cfg.get("ledgerlm_logit_softcap", 0.0))
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def cross_entropy_mean(logits, targets):
    flat = logits.reshape(-1, logits.shape[-1])
    lse = torch.logsumexp(flat, dim=-1)
    picked = flat.gather(1, targets.reshape(-1, 1)).squeeze(1)
    return (lse - picked).mean()


def load_weights(path, cfg, dtype, lora=False):
    arrays, _ = safetensors_io.read(path)
    untied = cfg.get("tie_word_embeddings", True) is False
    if not untied:
        arrays.pop("lm_head.weight", None)  # tied to wte
    C, V, L = int(cfg["n_embd"]), int(cfg["vocab_size"]), int(cfg["n_layer"])
    F = int(cfg.get("n_inner") or 4 * C)
    H = int(cfg["n_head"])
    QKV = C + 2 * (ATTN["kv"] or H) * (C // H)
    expected = {"lm_head.weight": (V, C)} if untied else {}
    expected.update({
        "transformer.wte.weight": (V, C),
        "transformer.ln_f.weight": (C,),
        "transformer.ln_f.bias": (C,),
    })
    if not ATTN["rope"]:
        expected["transformer.wpe.weight"] = (int(cfg["n_positions"]), C)
    for layer in range(L):
        p = f"transformer.h.{layer}."
        expected.update({
            p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
            p + "attn.c_attn.weight": (C, QKV), p + "attn.c_attn.bias": (QKV,),
            p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
            p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
            p + "mlp.c_fc.weight": (C, F), p + "mlp.c_fc.bias": (F,),
            p + "mlp.c_proj.weight": (F, C), p + "mlp.c_proj.bias": (C,),
        })
        if MLP == "swiglu":
            expected.update({p + "mlp.gate_proj.weight": (C, F), p + "mlp.gate_proj.bias": (F,)})
    # Block variants: the tensors the configured model does not have.
    bias, norm_weight = cfg.get("bias", True), cfg.get("norm_weight", True)
    norm_bias = bias and cfg.get("norm", "layernorm") != "rmsnorm"
    for name in list(expected):
        if name.endswith("c_attn.bias") and (bias or cfg.get("qkv_bias", False)):
            continue
        if (name.endswith(".bias") and ".ln_" in name and not norm_bias) or \
                (name.endswith(".bias") and ".ln_" not in name and not bias) or \
                (name.endswith(".weight") and ".ln_" in name and not norm_weight):
            del expected[name]
    if lora:  # adapters of any Conv1D layer, shapes checked against the layer's
        # q, k and v's own adapters: (in, out) of their parts of c_attn.
        hd = C // H
        parts = {}
        for layer in range(L):
            p = f"transformer.h.{layer}.attn."
            kv_out = (ATTN["kv"] or H) * hd
            parts.update({p + "q_proj": (C, C), p + "k_proj": (C, kv_out),
                          p + "v_proj": (C, kv_out)})
        for name in [n for n in arrays if n.endswith(".lora_A.weight")]:
            layer = name[: -len(".lora_A.weight")]
            known = layer + ".weight" in expected or layer in parts
            if not known or layer + ".lora_B.weight" not in arrays:
                raise SystemExit(f"{path}: {name} adapts no layer, or has no lora_B")
            c_in, c_out = parts[layer] if layer in parts else expected[layer + ".weight"]
            r = arrays[name].shape[0]
            expected[name] = (r, c_in)
            expected[layer + ".lora_B.weight"] = (c_out, r)
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected))
    if missing or extra:
        raise SystemExit(f"{path}: missing tensors {missing}, unexpected tensors {extra}")
    weights = {}
    for name, shape in expected.items():
        if tuple(arrays[name].shape) != shape:
            raise SystemExit(f"{path}: {name} has shape {arrays[name].shape}, expected {shape}")
        weights[name] = torch.tensor(arrays[name].astype(np.float64), dtype=dtype,
                                     requires_grad=True)
    return weights


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--logits", action="store_true", help="also write the logits")
    ap.add_argument("--no-grads", action="store_true", help="forward only")
    ap.add_argument("--lora-scale", type=float, default=None,
                    help="adapters' alpha / r: read *.lora_A/B.weight tensors")
    ap.add_argument("--rope-interleaved", action="store_true",
                    help="rotate pairs (2i, 2i+1) instead of Llama's (i, i + hd/2)")
    args = ap.parse_args()
    global LORA_SCALE
    if args.lora_scale is not None:
        LORA_SCALE = args.lora_scale

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    dtype = torch.float32 if args.dtype == "float32" else torch.float64
    with open(args.config) as f:
        cfg = json.load(f)
    global NORM
    NORM = cfg.get("norm", "layernorm")
    if NORM not in ("layernorm", "rmsnorm"):
        raise SystemExit(f"norm {NORM!r}: expected layernorm or rmsnorm")
    if cfg.get("activation_function", "gelu_new") != "gelu_new":
        raise SystemExit("only activation_function gelu_new (tanh approximation) is modelled")
    global MLP
    MLP = cfg.get("ledgerlm_mlp", "gelu")
    if MLP not in ("gelu", "swiglu", "relu2"):
        raise SystemExit(f"ledgerlm_mlp {MLP}: expected gelu, swiglu or relu2")
    ATTN["rope"] = cfg.get("ledgerlm_position", "learned") == "rope"
    ATTN["theta"] = float(cfg.get("rope_theta", 10000.0))
    ATTN["kv"] = int(cfg.get("n_kv_head", 0) or 0)
    ATTN["qk_norm"] = bool(cfg.get("qk_norm", False))
    ATTN["eps"] = float(cfg.get("qk_norm_eps", 1e-6))
    ATTN["interleaved"] = args.rope_interleaved
    weights = load_weights(args.weights, cfg, dtype, lora=args.lora_scale is not None)
    batch, _ = safetensors_io.read(args.batch)
    tokens = torch.from_numpy(batch["tokens"].astype(np.int64))

    logits = gpt_logits(weights, cfg, tokens)
    out = {}
    if "targets" in batch:
        targets = torch.from_numpy(batch["targets"].astype(np.int64))
        loss = cross_entropy_mean(logits, targets)
        out["loss"] = np.array(loss.item(), dtype=np.float64)
        print(json.dumps({"loss": loss.item()}))
        if not args.no_grads:
            loss.backward()
            for name, t in weights.items():
                out[name] = t.grad.detach().numpy()
    elif not args.no_grads:
        raise SystemExit(f"{args.batch}: gradients need a 'targets' tensor (or pass --no-grads)")
    if args.logits:
        out["logits"] = logits.detach().numpy()
    safetensors_io.write(args.out, out, {"dtype": args.dtype})


if __name__ == "__main__":
    main()
