"""Times PyTorch training steps of a Llama-style model (transformers' LlamaForCausalLM) on random
tokens: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases, an untied
head, fp32 weights and torch.optim.AdamW. The peer of `ledgerlm bench` for
scripts/bench/bench_vs_torch_llama.sh.

  --mode eager     the model as transformers runs it (attention through
                   torch.nn.functional.scaled_dot_product_attention, "sdpa")
  --mode compile   the same model wrapped in torch.compile (inductor, its CPU C++/OpenMP codegen);
                   the compile happens in the warm-up steps, which are not timed

The optimizer is AdamW with fused=True where this torch supports it on the CPU, else
foreach=True (the multi-tensor update): the fastest standard update either way.

Prints one line `torch_json {...}`: median/min/max tokens/s over the timed steps, the parameter
count, the peak RSS of this process and the torch/transformers versions.

usage: OMP_NUM_THREADS=2 VENV/bin/python bench_torch_llama.py --layers 6 --heads 6 --kv-heads 2 \
       --embd 384 --ffn 1024 --seq 256 --batch 8 --vocab 8192 [--mode eager|compile]
"""

import argparse
import json
import resource
import statistics
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    for name in ("layers", "heads", "kv-heads", "embd", "ffn", "seq", "batch", "vocab"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
    args = ap.parse_args()

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.embd, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, max_position_embeddings=args.seq,
        rms_norm_eps=args.eps, rope_theta=args.rope_theta, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).float().train()
    params = sum(p.numel() for p in model.parameters())
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        update = "fused"
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        update = "foreach"
    step_model = torch.compile(model) if args.mode == "compile" else model

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        out = step_model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        return out.loss.item()

    for _ in range(args.warmup):
        step()
    tps = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        tps.append(args.batch * args.seq / (time.perf_counter() - t0))
    print("torch_json " + json.dumps({
        "tokens_per_s": statistics.median(tps), "min": min(tps), "max": max(tps),
        "params": params, "mode": args.mode, "adamw": update,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
