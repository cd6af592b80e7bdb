"""Makes tests/reference/fixtures/hf_gpt2_tiny/: a small random GPT2LMHeadModel saved the way
Hugging Face transformers saves one, and the loss transformers computes with it.

The fixture is made once and committed; the tests (tests/e2e/test_import_hf.cpp) read it offline
and never need transformers. It holds:
  config.json, model.safetensors   save_pretrained(safe_serialization=True): vocab 1000 (ledgerlm
                                   pads it to 1024), n_positions 64, n_embd 64, n_layer 2,
                                   n_head 4, fp32
  loss.json                        token ids [B, 64] drawn with a fixed seed, and transformers'
                                   mean next-token loss over the B x 63 shifted positions: in
                                   float32 model(ids, labels=ids).loss; in float64 the same mean
                                   from the float64 model's logits (the labels= path casts logits
                                   to float32 first); plus the versions that computed them

GPT2LMHeadModel's own init leaves every bias at 0 and every LayerNorm at (1, 0), which would let a
mapping that mixes those tensors up pass unnoticed: every tensor is perturbed with fixed-seed
noise so that each one matters to the loss.

Made with torch 2.15.0, transformers 5.24.0, safetensors 0.8.0 (as recorded in loss.json). To
make it again (the files change only if those versions draw or save differently):
  /work/venv-hf/bin/python tests/reference/gen_hf_model_fixture.py
or with any Python that has torch, transformers and safetensors, from the repository root.
"""

import json
import os
import shutil

import safetensors
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "hf_gpt2_tiny")
SEED = 20240611
BATCH, LENGTH = 3, 64


def build_model():
    torch.manual_seed(SEED)
    config = transformers.GPT2Config(
        vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
        activation_function="gelu_new", layer_norm_epsilon=1e-5,
        resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
        bos_token_id=999, eos_token_id=999)
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or \
                    name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.2 * noise)
            elif p.dim() == 1:  # biases, LayerNorm biases
                p.copy_(0.05 * noise)
            else:  # matrices and embeddings: larger than the init so the logits have structure
                p.add_(0.05 * noise)
    return model


def main():
    model = build_model()
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    model.save_pretrained(OUT, safe_serialization=True)
    for extra in os.listdir(OUT):  # generation_config.json and the like: not read by ledgerlm
        if extra not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(OUT, extra))

    gen = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(0, model.config.vocab_size, (BATCH, LENGTH), generator=gen)
    losses = {}
    with torch.no_grad():
        # fp32: the loss transformers returns for labels=ids.
        m32 = transformers.GPT2LMHeadModel.from_pretrained(OUT, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
        losses["loss_float32"] = m32(ids, labels=ids).loss.item()
        # fp64: the labels= path casts the logits to fp32 before its cross-entropy, so the mean
        # cross-entropy of the same shifted positions is taken here from transformers' fp64
        # logits, in fp64.
        m64 = transformers.GPT2LMHeadModel.from_pretrained(OUT, dtype=torch.float64,
                                                           attn_implementation="eager").eval()
        logits = m64(ids).logits
        assert logits.dtype == torch.float64
        losses["loss_float64"] = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).item()
    record = {
        "note": "the mean cross-entropy of positions 0..62 predicting tokens 1..63 of each row: "
                "loss_float32 is GPT2LMHeadModel(input_ids, labels=input_ids).loss in fp32, "
                "loss_float64 the same mean taken in fp64 from the fp64 model's logits",
        "input_ids": ids.tolist(),
        **losses,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__},
    }
    with open(os.path.join(OUT, "loss.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in record.items() if k != "input_ids"}))


if __name__ == "__main__":
    main()
