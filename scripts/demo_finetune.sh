#!/usr/bin/env bash
# Fine-tuning from the shell, end to end: a GPT-2 pretrained on the King James Bible (runs/demo
# from scripts/demo.sh, or a shorter pretraining here when it is missing) is exported in Hugging
# Face format, imported back the way any GPT2LMHeadModel would be, and adapted with LoRA to a
# very different text, the software licenses every Debian system ships
# (/usr/share/common-licenses). It is evaluated on the licenses' held-out text before and after,
# then sampled. The same steps work for a real GPT-2: `prepare --tokenizer hf:DIR` for its
# tokenizer, `import --format hf --from DIR`.
#
#   scripts/demo_finetune.sh [extra train flags for the LoRA run]
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), FT_STEPS (default 300 LoRA steps),
# FT_BASE_SECONDS (default 150: the pretraining budget when runs/demo is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${LEDGERLM_BIN:-build/ledgerlm}"
steps="${FT_STEPS:-300}"
[[ -x "$bin" ]] || scripts/setup.sh
[[ -f data_out/kjv/meta.json ]] || scripts/prepare_default.sh

# 1. The base model: pretrained on the KJV.
if [[ ! -f runs/demo/model.safetensors ]]; then
  "$bin" train --config configs/demo.toml --train.max_seconds "${FT_BASE_SECONDS:-150}"
fi

# 2. Export it as a Hugging Face GPT-2, 3. tokenize the new text with the base's tokenizer,
# 4. import the export with that data attached.
rm -rf runs/demo_hf runs/demo_imported data_out/licenses
"$bin" export --run runs/demo --format hf --out runs/demo_hf
"$bin" prepare --input /usr/share/common-licenses --out data_out/licenses --tokenizer from:data_out/kjv
"$bin" import --format hf --from runs/demo_hf --out runs/demo_imported --data data_out/licenses

# 5. Before: the Bible model on the licenses' held-out text.
echo "finetune: before (the base model on the licenses' val split)"
"$bin" eval --run runs/demo_imported --split val

# 6. LoRA: rank 8 on every linear layer; the architecture comes from the imported run.
"$bin" train --init-from runs/demo_imported --data.dir data_out/licenses --train.name licenses_lora \
  --train.overwrite true --lora.rank 8 --lora.alpha 16 --lora.targets qkv,attn_proj,mlp_fc,mlp_proj \
  --optim.name adamw --optim.lr 2e-3 --optim.warmup_steps 20 --train.max_steps "$steps" \
  --train.micro_batch 16 --train.seq_len 128 --train.eval_interval 100 --train.eval_windows 64 \
  --train.log_interval 50 "$@"

# 7. After: the same held-out text; then what it writes now.
echo "finetune: after (LoRA, adapters merged into the base weights for eval and sample)"
"$bin" eval --run runs/licenses_lora --split val
"$bin" sample --run runs/licenses_lora --prompt "This License" --tokens 80 --temperature 0.8 --top-k 40 --seed 1
