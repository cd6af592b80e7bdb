#!/usr/bin/env bash
# Prepares ledgerlm's default corpus: the King James Bible (Debian package bible-kjv) as plain
# text, one verse per line with the verse references stripped, tokenized with a 4096-piece BPE
# and a 10% val split (the last 10% of the text).
#
#   scripts/prepare_default.sh        -> data_out/kjv.txt and data_out/kjv/{train,val}.bin, ...
#
# Idempotent: an existing data_out/kjv.txt of the expected size is reused, and an existing
# data_out/kjv/meta.json means there is nothing to do (unless its token shards are of format 1,
# without checksums: then it is rebuilt with its own tokenizer, giving the same tokens).
# Environment:
#   LEDGERLM_BIN       the ledgerlm binary (default: build/ledgerlm)
#   LEDGERLM_DATA_OUT  output directory (default: data_out in the repository root)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bin="${LEDGERLM_BIN:-build/ledgerlm}"
out="${LEDGERLM_DATA_OUT:-data_out}"
text="$out/kjv.txt"
data="$out/kjv"
expected_bytes=4137850

old_format=0
if [[ -f "$data/meta.json" ]]; then
  # Token shards of format 1 (no checksums, written before ledgerlm had them) are refused by
  # train: rebuilt from the same text with the same tokenizer, which gives the same tokens.
  if [[ "$(od -An -tu4 -j8 -N4 "$data/train.bin" 2>/dev/null | tr -d ' ')" == 1 ]]; then
    echo "prepare_default: $data has token shards without checksums (format 1): rebuilding it"
    old_format=1
  else
    echo "prepare_default: $data already prepared (remove it to rebuild)"
    exit 0
  fi
fi
if [[ -e "$data" && $old_format == 0 ]]; then
  echo "prepare_default: error: $data exists but has no meta.json; remove it and rerun" >&2
  exit 1
fi

mkdir -p "$out"
if [[ ! -s "$text" ]]; then
  if ! command -v bible >/dev/null 2>&1; then
    echo "prepare_default: error: the 'bible' command is missing (apt-get install bible-kjv)" >&2
    exit 1
  fi
  echo "prepare_default: writing $text from bible-kjv"
  # Each verse is printed as "Ge1:1 In the beginning ...": strip the reference. Write to a temp
  # file first so an interrupted run never leaves a short kjv.txt that looks finished.
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$text.tmp"
  mv "$text.tmp" "$text"
fi

# Loose check: another bible-kjv release may differ slightly; a broken extraction differs a lot.
bytes=$(wc -c < "$text")
if (( bytes < expected_bytes * 99 / 100 || bytes > expected_bytes * 101 / 100 )); then
  echo "prepare_default: error: $text has $bytes bytes, expected about $expected_bytes" \
       "(remove it and rerun)" >&2
  exit 1
fi
if (( bytes != expected_bytes )); then
  echo "prepare_default: note: $text has $bytes bytes (reference: $expected_bytes)"
fi

if [[ ! -x "$bin" ]]; then
  echo "prepare_default: error: ledgerlm binary $bin not found (build it, or set LEDGERLM_BIN)" >&2
  exit 1
fi
if (( old_format )); then
  rm -rf "$data.rebuild"
  "$bin" prepare --input "$text" --tokenizer "from:$data" --val-fraction 0.1 --out "$data.rebuild"
  rm -rf "$data"
  mv "$data.rebuild" "$data"
  exit 0
fi
"$bin" prepare --input "$text" --vocab-size 4096 --val-fraction 0.1 --out "$data"
