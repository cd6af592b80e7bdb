#!/usr/bin/env bash
# Encoder speed of ledgerlm's hf-bpe tokenizer against the Hugging Face tokenizers library on the
# same text and the same tokenizer, in one run:
#   1. trains a GPT-2-style byte-level BPE (vocabulary BENCH_VOCAB + <|endoftext|>) on the text
#      with the tokenizers library;
#   2. ledgerlm: `ledgerlm prepare --tokenizer hf:DIR --val-fraction 0 --threads 1`, whose
#      "encoded ... MB/s" line times the encoding pass (reading, SHA-256, encoding and writing
#      the shard; one encoding thread, a fresh process and word cache each time);
#   3. tokenizers: Tokenizer.encode(text) on one thread (RAYON_NUM_THREADS=1), and
#      encode_batch(lines) on one thread and on every core, a freshly loaded tokenizer each time;
#   4. checks that both gave the same ids for the whole text.
# Figures are the best of BENCH_REPEATS runs, in MB/s of UTF-8 input (1 MB = 10^6 bytes).
#
#   scripts/bench/bench_tokenizer.sh [TEXT_FILE]   (default: the King James Bible, as
#                                                   scripts/prepare_default.sh writes it)
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_PYTHON (a python3 with the tokenizers
# package; default python3), BENCH_VOCAB (default 16384), BENCH_REPEATS (default 3). Prints
# figures; fails only when the ids differ.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_tokenizer
py="${BENCH_PYTHON:-python3}"
vocab="${BENCH_VOCAB:-16384}"
repeats="${BENCH_REPEATS:-3}"
need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_python_module "$py" tokenizers "set BENCH_PYTHON"

work="$(mktemp -d /tmp/bench_tokenizer.XXXXXX)"
trap 'rm -rf "$work"' EXIT
text="${1:-}"
if [[ -z "$text" ]]; then
  text="$work/kjv.txt"
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$text"
fi

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "text: $text ($(stat -c %s "$text") bytes)"

# 1. The tokenizer.
"$py" - "$text" "$work/tok" "$vocab" <<'PY'
import sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
text, out, vocab = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train([text], trainer)
tok.add_special_tokens(["<|endoftext|>"])
out.mkdir()
tok.save(str(out / "tokenizer.json"))
print(f"tokenizer: byte-level BPE trained on the text, vocab {tok.get_vocab_size()}")
PY

# 2. ledgerlm.
best_ours=0
for ((i = 0; i < repeats; ++i)); do
  line=$("$bin" prepare --input "$text" --out "$work/out$i" --tokenizer "hf:$work/tok" \
    --val-fraction 0 --threads 1 | grep "prepare: encoded")
  rate=$(sed -E 's/.*\(([0-9.]+) MB\/s.*/\1/' <<<"$line")
  best_ours=$(awk -v a="$best_ours" -v b="$rate" 'BEGIN { print (b > a) ? b : a }')
done
echo "ledgerlm hf-bpe, 1 thread:            $best_ours MB/s"

# 3 and 4. tokenizers, and the comparison of ids.
RAYON_NUM_THREADS=1 "$py" - "$text" "$work/tok/tokenizer.json" "$work/out0/train.bin" \
  "$repeats" single <<'PY'
import struct, sys, time
from tokenizers import Tokenizer
text_path, tok_path, shard, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(text_path, encoding="utf-8").read()
mb = len(text.encode("utf-8")) / 1e6
best, ids = 0.0, None
for _ in range(repeats):
    tok = Tokenizer.from_file(tok_path)
    t0 = time.perf_counter()
    ids = tok.encode(text).ids
    best = max(best, mb / (time.perf_counter() - t0))
print(f"tokenizers encode, 1 thread:         {best:.2f} MB/s")
with open(shard, "rb") as f:
    magic, _version, width, count, _block, _crc = struct.unpack("<8sIIQII", f.read(32))
    ours = list(struct.unpack(f"<{count}{'H' if width == 2 else 'i'}", f.read(count * width)))
eot = tok.token_to_id("<|endoftext|>")
same = ours == ids + [eot]
print(f"ids identical: {'yes' if same else 'NO'} ({len(ids)} tokens)")
sys.exit(0 if same else 1)
PY
batch_py='
import os, sys, time
from tokenizers import Tokenizer
text_path, tok_path, repeats, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(text_path, encoding="utf-8").read()
lines = text.splitlines(keepends=True)
mb = len(text.encode("utf-8")) / 1e6
best = 0.0
for _ in range(repeats):
    tok = Tokenizer.from_file(tok_path)
    t0 = time.perf_counter()
    tok.encode_batch(lines)
    best = max(best, mb / (time.perf_counter() - t0))
print(f"tokenizers encode_batch(lines), {threads} thread(s): {best:.2f} MB/s")
'
RAYON_NUM_THREADS=1 "$py" -c "$batch_py" "$text" "$work/tok/tokenizer.json" "$repeats" 1
"$py" -c "$batch_py" "$text" "$work/tok/tokenizer.json" "$repeats" "$(nproc)"
