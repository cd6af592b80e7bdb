#!/usr/bin/env bash
# Measures `ledgerlm prepare` on generated corpora (not a test; prints figures): wall time, the
# "encoded ... MB/s" line and peak resident memory (/usr/bin/time -v), with the load average at
# the start and end of every row. At every size: the bytes tokenizer, the hf-bpe test fixture
# (tests/reference/fixtures/hf_tokenizer, vocab 1001) and a realistic hf-bpe tokenizer, to show
# memory does not grow with the input. At the comparison sizes, next to other encoders on the
# same text with the same tokenizer:
#   - ledgerlm --tokenizer bpe --vocab-size BENCH_BPE_VOCAB (sentencepiece training on
#     --bpe-sample-mb of the text, then encoding) and sentencepiece's own spm_encode (Debian
#     package sentencepiece) with the model ledgerlm trained;
#   - the Hugging Face tokenizers library (encode_batch over batches of lines, RAYON_NUM_THREADS
#     threads) with the same tokenizer.json that `ledgerlm prepare --tokenizer hf:DIR` reads.
# That tokenizer is trained first with the tokenizers library itself: a GPT-2 style byte-level
# BPE (ByteLevel pre-tokenizer without prefix space, ByteLevel decoder and post-processor, all
# 256 bytes in the alphabet, <|endoftext|> as its added token), vocab BENCH_HF_VOCAB, on the first
# BENCH_HF_SAMPLE_MB of the corpus (make_corpus.py writes the same stream for every size, so this
# is the prefix of each corpus and the tokenizer is the same at every size). Before measuring,
# the first 5 MB are prepared with it and the ids compared with the library's own, encoding the
# text whole and line by line (the benchmark's way); a difference is printed, not hidden.
# The corpora are made by scripts/bench/make_corpus.py from the King James Bible (data_out/kjv.txt,
# scripts/prepare_default.sh) and deleted afterwards, as are the prepared directories.
#
#   scripts/bench/bench_prepare.sh [SIZE_MB ...]     (default: 200 2000)
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_THREADS (default 2), BENCH_DIR (where
# the corpora go, default /tmp; 2000 MB needs ~7 GB free), BENCH_COMPARE_MB (the size at which the
# other encoders run, default the first size; `all`: every size), BENCH_PYTHON (a python3 with the
# tokenizers package; default python3), BENCH_HF_VOCAB (default 32768), BENCH_HF_SAMPLE_MB
# (default 50), BENCH_BPE_VOCAB (default 32768). 1 MB = 10^6 bytes.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_prepare
bin="$(realpath "$bin")"
threads="${BENCH_THREADS:-2}"
py="${BENCH_PYTHON:-python3}"
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(200 2000)
compare="${BENCH_COMPARE_MB:-${sizes[0]}}"
hf_vocab="${BENCH_HF_VOCAB:-32768}"
hf_sample_mb="${BENCH_HF_SAMPLE_MB:-50}"
bpe_vocab="${BENCH_BPE_VOCAB:-32768}"
fixture="$repo_root/tests/reference/fixtures/hf_tokenizer"
need_exec "$bin" "build first, or set LEDGERLM_BIN"
need_exec /usr/bin/time "apt-get install time"
need_python_module "$py" tokenizers "set BENCH_PYTHON"
tokenizers_version=$("$py" -c 'import tokenizers; print(tokenizers.__version__)')

work="$(mktemp -d "${BENCH_DIR:-/tmp}/bench_prepare.XXXXXX")"
trap 'rm -rf "$work"' EXIT
source_text="$repo_root/data_out/kjv.txt"
if [[ ! -s "$source_text" ]]; then
  source_text="$work/kjv.txt"
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$source_text"
fi

load1() { cut -d' ' -f1 /proc/loadavg; }
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
  "avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ledgerlm: $bin, --threads $threads; tokenizers $tokenizers_version;" \
  "$(spm_encode --version 2>/dev/null || echo 'spm_encode not found (apt-get install sentencepiece)')"

# Runs a command under /usr/bin/time -v; sets wall (s), rss (MiB) and load (1-minute load
# average at the start and the end).
timed() {
  local load_start
  load_start=$(load1)
  /usr/bin/time -v -o "$work/time" "$@"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
    for (i = 1; i <= n; ++i) s = s * 60 + t[i]; print s}' "$work/time")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.1f", $2 / 1024}' "$work/time")
  load="load $load_start-$(load1)"
}

row() {  # size encoder wall mbps rss notes
  printf '%-8s %-31s %9.1f %9.2f %10s %s\n' "$1" "$2" "$3" "$4" "$5" "$6"
}

prepare_row() {  # size corpus label tokenizer-args...
  local size=$1 corpus=$2 label=$3
  shift 3
  timed "$bin" prepare --input "$corpus" --out "$work/out" --threads "$threads" "$@" >"$work/log"
  local line mbps notes
  line=$(grep "prepare: encoded" "$work/log")
  mbps=$(sed -E 's/.*\(([0-9.]+) MB\/s.*/\1/' <<<"$line")
  notes="$load; encoding pass $(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$line") s"
  if grep -q "trained bpe" "$work/log"; then
    notes="$notes; $(grep -o 'trained bpe tokenizer in [0-9.]* s' "$work/log" | sed 's/trained bpe tokenizer/training/')"
    notes="$notes on $(grep -o 'on [a-z ]*[0-9]* bytes' "$work/log" | head -1 | sed 's/^on //')"
  fi
  row "$size" "$label" "$wall" "$mbps" "$rss" "$notes"
}

# The realistic hf-bpe tokenizer, trained by the tokenizers library on the corpus's prefix.
hf="$work/hf_bpe"
mkdir -p "$hf"
"$py" scripts/bench/make_corpus.py "$source_text" "$work/hf_sample.txt" "$hf_sample_mb" --seed 1 >/dev/null
RAYON_NUM_THREADS="$threads" timed "$py" - "$work/hf_sample.txt" "$hf" "$hf_vocab" >"$work/train.log" <<'PY'
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
sample, out_dir, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tok.train([sample], trainer)
tok.save(f"{out_dir}/tokenizer.json")
print(tok.get_vocab_size())
PY
echo "hf-bpe tokenizer: trained by tokenizers $tokenizers_version on the first $hf_sample_mb MB in" \
  "$wall s ($rss MiB), vocab $(cat "$work/train.log"), sha256 $(sha256sum "$hf/tokenizer.json" | cut -c1-16)"

# The ids ledgerlm writes with it, against the library's, on the first 5 MB (one document, no val
# part: train.bin is the text's ids and one eot).
"$py" scripts/bench/make_corpus.py "$source_text" "$work/check.txt" 5 --seed 1 >/dev/null
"$bin" prepare --input "$work/check.txt" --out "$work/out" --tokenizer "hf:$hf" --val-fraction 0 \
  --threads "$threads" >/dev/null
"$py" - "$work/out/train.bin" "$work/check.txt" "$hf/tokenizer.json" <<'PY'
import struct, sys
from tokenizers import Tokenizer
shard, text_path, tok_path = sys.argv[1:4]
with open(shard, "rb") as f:  # format 2 (data/README.md): 32-byte header, then the tokens
    head = f.read(32)
    assert head[:8] == b"LLMTOKS1", f"{shard}: not a token shard"
    width, count = struct.unpack_from("<IQ", head, 12)
    ours = list(struct.unpack(f"<{count}{'H' if width == 2 else 'i'}", f.read(count * width)))
tok = Tokenizer.from_file(tok_path)
text = open(text_path, encoding="utf-8").read()
eot = tok.token_to_id("<|endoftext|>")
whole = tok.encode(text).ids + [eot]
by_line = [i for e in tok.encode_batch(text.splitlines(keepends=True)) for i in e.ids] + [eot]
for name, ref in (("whole text", whole), ("line by line", by_line)):
    if ref == ours:
        print(f"id check, {name}: identical ({len(ref)} ids)")
    else:
        k = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), min(len(ref), len(ours)))
        print(f"id check, {name}: DIFFERENT from id {k} (tokenizers {len(ref)} ids, ledgerlm "
              f"{len(ours)}): tokenizers {ref[k:k + 5]}, ledgerlm {ours[k:k + 5]}")
PY
rm -rf "$work/out" "$work/check.txt" "$work/hf_sample.txt"

printf '%-8s %-31s %9s %9s %10s %s\n' size encoder wall_s MB/s peak_MiB notes
for size in "${sizes[@]}"; do
  corpus="$work/corpus_$size.txt"
  "$py" scripts/bench/make_corpus.py "$source_text" "$corpus" "$size" --seed 1 >/dev/null
  mb=$(awk -v b="$(stat -c %s "$corpus")" 'BEGIN { printf "%.2f", b / 1e6 }')
  prepare_row "$size" "$corpus" "ledgerlm bytes" --tokenizer bytes
  rm -rf "$work/out"
  prepare_row "$size" "$corpus" "ledgerlm hf-bpe (fixture 1001)" --tokenizer "hf:$fixture"
  rm -rf "$work/out"
  prepare_row "$size" "$corpus" "ledgerlm hf-bpe ($hf_vocab)" --tokenizer "hf:$hf"
  rm -rf "$work/out"
  if [[ "$compare" == all || " $compare " == *" $size "* ]]; then
    prepare_row "$size" "$corpus" "ledgerlm bpe ($bpe_vocab)" --tokenizer bpe --vocab-size "$bpe_vocab"
    if command -v spm_encode >/dev/null; then
      timed spm_encode --model="$work/out/tokenizer.model" --output_format=id \
        --input="$corpus" --output=/dev/null
      row "$size" "spm_encode (same model)" "$wall" "$(awk -v m="$mb" -v s="$wall" 'BEGIN { print m / s }')" \
        "$rss" "$load; 1 thread (it has no thread option)"
    fi
    rm -rf "$work/out"
    RAYON_NUM_THREADS="$threads" timed "$py" - "$corpus" "$hf/tokenizer.json" >"$work/hf.log" <<'PY'
import sys, time
from tokenizers import Tokenizer
corpus, tok_path = sys.argv[1], sys.argv[2]
tok = Tokenizer.from_file(tok_path)
t0 = time.perf_counter()
done = 0
with open(corpus, encoding="utf-8") as f:
    while True:
        lines = f.readlines(4 << 20)  # about 4 MB of whole lines at a time
        if not lines:
            break
        tok.encode_batch(lines)
        done += sum(len(l.encode("utf-8")) for l in lines)
s = time.perf_counter() - t0
print(f"{done / 1e6 / s:.2f}")
PY
    row "$size" "tokenizers encode_batch" "$wall" "$(cat "$work/hf.log")" "$rss" \
      "$load; hf-bpe ($hf_vocab), $threads threads"
  fi
  rm -f "$corpus"
done
