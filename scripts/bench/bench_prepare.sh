#!/usr/bin/env bash
# Measures `ledgerlm prepare` on generated corpora (not a test; prints figures): wall time, the
# "encoded ... MB/s" line and peak resident memory (/usr/bin/time -v) with the bytes and the
# hf-bpe tokenizer at every size, to show memory does not grow with the input; and, at one size,
# next to other encoders on the same text with the same tokenizer:
#   - ledgerlm --tokenizer bpe (trains on --bpe-sample-mb of it, then encodes) and sentencepiece's
#     own spm_encode (Debian package sentencepiece) with the model ledgerlm trained;
#   - the Hugging Face tokenizers library (encode_batch over batches of lines, RAYON_NUM_THREADS
#     threads) with the hf-bpe fixture, tests/reference/fixtures/hf_tokenizer.
# The corpora are made by scripts/bench/make_corpus.py from the King James Bible (data_out/kjv.txt,
# scripts/prepare_default.sh) and deleted afterwards, as are the prepared directories.
#
#   scripts/bench/bench_prepare.sh [SIZE_MB ...]     (default: 200 2000)
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_THREADS (default 2), BENCH_DIR (where
# the corpora go, default /tmp; 2000 MB needs ~7 GB free), BENCH_COMPARE_MB (the size at which the
# other encoders run, default the first size), BENCH_PYTHON (a python3 with the tokenizers
# package; default python3). 1 MB = 10^6 bytes.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
bin="$(realpath "${LEDGERLM_BIN:-build/ledgerlm}")"
threads="${BENCH_THREADS:-2}"
py="${BENCH_PYTHON:-python3}"
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(200 2000)
compare="${BENCH_COMPARE_MB:-${sizes[0]}}"
hf="$repo_root/tests/reference/fixtures/hf_tokenizer"
[[ -x "$bin" ]] || { echo "bench_prepare: error: $bin not found (build first, or set LEDGERLM_BIN)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_prepare: error: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }

work="$(mktemp -d "${BENCH_DIR:-/tmp}/bench_prepare.XXXXXX")"
trap 'rm -rf "$work"' EXIT
source_text="$repo_root/data_out/kjv.txt"
if [[ ! -s "$source_text" ]]; then
  source_text="$work/kjv.txt"
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$source_text"
fi

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ledgerlm: $bin, --threads $threads"
printf '%-8s %-26s %9s %9s %10s %s\n' size encoder wall_s MB/s peak_MiB notes

# Runs a command under /usr/bin/time -v; sets wall (s) and rss (MiB).
timed() {
  /usr/bin/time -v -o "$work/time" "$@"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
    for (i = 1; i <= n; ++i) s = s * 60 + t[i]; print s}' "$work/time")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.1f", $2 / 1024}' "$work/time")
}

row() {  # size encoder wall mbps rss notes
  printf '%-8s %-26s %9.1f %9.2f %10s %s\n' "$1" "$2" "$3" "$4" "$5" "$6"
}

prepare_row() {  # size corpus label tokenizer-args...
  local size=$1 corpus=$2 label=$3
  shift 3
  timed "$bin" prepare --input "$corpus" --out "$work/out" --threads "$threads" "$@" >"$work/log"
  local line mbps notes
  line=$(grep "prepare: encoded" "$work/log")
  mbps=$(sed -E 's/.*\(([0-9.]+) MB\/s.*/\1/' <<<"$line")
  notes="encoding pass $(sed -E 's/.* in ([0-9.]+) s .*/\1/' <<<"$line") s"
  if grep -q "trained bpe" "$work/log"; then
    notes="$notes; $(grep -o 'trained bpe tokenizer in [0-9.]* s' "$work/log" | sed 's/trained bpe tokenizer/training/')"
    notes="$notes on $(grep -o 'on [a-z ]*[0-9]* bytes' "$work/log" | head -1 | sed 's/^on //')"
  fi
  row "$size" "$label" "$wall" "$mbps" "$rss" "$notes"
}

for size in "${sizes[@]}"; do
  corpus="$work/corpus_$size.txt"
  "$py" scripts/bench/make_corpus.py "$source_text" "$corpus" "$size" --seed 1 >/dev/null
  mb=$(awk -v b="$(stat -c %s "$corpus")" 'BEGIN { printf "%.2f", b / 1e6 }')
  prepare_row "$size" "$corpus" "ledgerlm bytes" --tokenizer bytes
  rm -rf "$work/out"
  prepare_row "$size" "$corpus" "ledgerlm hf-bpe" --tokenizer "hf:$hf"
  rm -rf "$work/out"
  if [[ "$size" == "$compare" ]]; then
    prepare_row "$size" "$corpus" "ledgerlm bpe (4096)" --tokenizer bpe --vocab-size 4096
    if command -v spm_encode >/dev/null; then
      timed spm_encode --model="$work/out/tokenizer.model" --output_format=id \
        --input="$corpus" --output=/dev/null
      row "$size" "spm_encode (same model)" "$wall" "$(awk -v m="$mb" -v s="$wall" 'BEGIN { print m / s }')" \
        "$rss" "1 thread (it has no thread option)"
    else
      echo "(spm_encode not found: apt-get install sentencepiece)"
    fi
    rm -rf "$work/out"
    if "$py" -c "import tokenizers" 2>/dev/null; then
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
        "$threads threads, tokenizers $("$py" -c 'import tokenizers; print(tokenizers.__version__)')"
    else
      echo "($py has no tokenizers package: set BENCH_PYTHON)"
    fi
  fi
  rm -f "$corpus"
done
