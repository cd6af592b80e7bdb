"""Makes tests/reference/fixtures/hf_llama_tiny/ and hf_qwen2_tiny/: small random
LlamaForCausalLM (grouped-query attention: 4 heads, 2 kv heads, untied head, vocab 600: the ids
of fixtures/hf_families/smollm2/tokenizer.json) and Qwen2ForCausalLM (q/k/v biases, tied head,
vocab 640: the 603 ids of fixtures/hf_families/qwen2/tokenizer.json padded to a multiple of 64 as
Qwen2.5 pads its embedding; saved sharded with model.safetensors.index.json) saved the way
transformers saves them, with transformers' per-position logits.

The fixtures are made once and committed; tests/e2e/test_import_hf_llama.cpp reads them offline.
Each directory holds:
  config.json, model.safetensors | model-0000N-of-0000M.safetensors + model.safetensors.index.json
  logits.safetensors  input_ids [B, T] (I32) drawn with a fixed seed and the fp64 model's logits
                (transformers, eager attention) on them, [B, T, V] rounded to F32; metadata: the
                largest |fp32 model's logit - fp64 model's| (transformers' own fp32 rounding)
                and the versions that computed them
  peft_names.json  (hf_llama_tiny only) the adapter tensors PEFT itself saves for LoRA r = 2 on
                every linear layer: names and shapes, what ledgerlm's export --lora-only must match

The random init of transformers is small (std 0.02): every weight is redrawn larger (matrices
std 0.3, norms 1 +- 0.3, biases +- 0.5) so that attention is sharp and a wrong RoPE pairing, a
swapped head or a misplaced k/v row block moves the logits by far more than fp32 rounding.

Made with torch 2.15, transformers 5.25, peft 0.22 (recorded in logits.safetensors, peft_names.json):
  /path/to/venv/bin/python tests/reference/gen_hf_llama_fixture.py
"""

import json
import os
import shutil

import safetensors
import safetensors.torch
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261207
BATCH, LENGTH = 2, 16


def sharpen(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * noise)
            elif p.dim() == 1:
                p.copy_(0.5 * noise)
            else:
                p.copy_(0.3 * noise)


def make(name, config_cls, model_cls, shard, **kw):
    out = os.path.join(HERE, "fixtures", name)
    torch.manual_seed(SEED)
    config = config_cls(**kw)
    model = model_cls(config).eval()
    sharpen(model, SEED + len(name))
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    model.save_pretrained(out, safe_serialization=True,
                          max_shard_size="40KB" if shard else "100GB")
    for extra in os.listdir(out):  # generation_config.json: not read by ledgerlm
        if extra == "generation_config.json":
            os.remove(os.path.join(out, extra))
    gen = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(0, config.vocab_size, (BATCH, LENGTH), generator=gen)
    with torch.no_grad():
        m64 = model_cls.from_pretrained(out, dtype=torch.float64,
                                        attn_implementation="eager").eval()
        logits = m64(ids).logits
        assert logits.dtype == torch.float64
        m32 = model_cls.from_pretrained(out, dtype=torch.float32,
                                        attn_implementation="eager").eval()
        fp32_error = float((m32(ids).logits.double() - logits).abs().max())
    safetensors.torch.save_file(
        {"input_ids": ids.to(torch.int32).contiguous(),
         "logits": logits.to(torch.float32).contiguous()},
        os.path.join(out, "logits.safetensors"),
        metadata={"transformers_fp32_max_error": "%.9g" % fp32_error,
                  "torch": torch.__version__, "transformers": transformers.__version__,
                  "safetensors": safetensors.__version__})
    if name == "hf_llama_tiny":
        peft_names(out, model_cls)
    print(name, sorted(os.listdir(out)), float(logits.abs().max()), "fp32 error", fp32_error)


def peft_names(out, model_cls):
    import peft
    import tempfile
    base = model_cls.from_pretrained(out, dtype=torch.float32)
    modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = peft.get_peft_model(base, peft.LoraConfig(r=2, lora_alpha=4, target_modules=modules,
                                                     task_type="CAUSAL_LM"))
    with tempfile.TemporaryDirectory() as tmp:
        lora.save_pretrained(tmp)
        with safetensors.safe_open(os.path.join(tmp, "adapter_model.safetensors"), "pt") as f:
            names = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    with open(os.path.join(out, "peft_names.json"), "w") as f:
        json.dump({"note": "adapter_model.safetensors of PEFT " + peft.__version__ +
                           ": LoraConfig(r=2, target_modules=" + ",".join(modules) + ")",
                   "tensors": names}, f, indent=0, sort_keys=True)
        f.write("\n")


def main():
    make("hf_llama_tiny", transformers.LlamaConfig, transformers.LlamaForCausalLM, False,
         vocab_size=600, hidden_size=24, intermediate_size=48, num_hidden_layers=2,
         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
         rms_norm_eps=1e-5, rope_theta=500.0, tie_word_embeddings=False,
         attention_bias=False, mlp_bias=False, hidden_act="silu", bos_token_id=0,
         eos_token_id=0)
    make("hf_qwen2_tiny", transformers.Qwen2Config, transformers.Qwen2ForCausalLM, True,
         vocab_size=640, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
         rms_norm_eps=1e-6, rope_theta=1000.0, tie_word_embeddings=True,
         use_sliding_window=False, sliding_window=32, max_window_layers=2, hidden_act="silu",
         bos_token_id=600, eos_token_id=600)


if __name__ == "__main__":
    main()
