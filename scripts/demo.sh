#!/usr/bin/env bash
# The demo: install + build (the ledgerlm binary only), prepare the King James Bible, train configs/demo.toml on the CPU,
# evaluate on the held-out last 10%, sample, and compare bits per byte with xz and bzip2 on the
# same val text. Train + eval + sample take about five minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
# Only what the demo runs: the runtime packages and the ledgerlm target (scripts/test.sh installs
# and builds everything, the tests included).
LEDGERLM_SETUP=runtime scripts/setup.sh
echo "demo: setup (install + build) took $(($(date +%s) - t0)) s"

t1=$(date +%s)
scripts/prepare_default.sh
echo "demo: corpus preparation took $(($(date +%s) - t1)) s"

bin=build/ledgerlm
t2=$(date +%s)
"$bin" train --config configs/demo.toml "$@"
"$bin" eval --run runs/demo --split val
"$bin" sample --run runs/demo --prompt "In the beginning" --tokens 120 --temperature 0.8 --top-k 40 --seed 1
"$bin" sample --run runs/demo --prompt "And Jesus said unto them" --tokens 120 --temperature 0.8 --top-p 0.9 --seed 2
echo "demo: train + eval + sample took $(($(date +%s) - t2)) s"

# The val split is the last val_bytes of the corpus: compress exactly that text.
val_bytes=$(/usr/bin/python3 -c 'import json;print(json.load(open("data_out/kjv/meta.json"))["val"]["bytes"])')
tail -c "$val_bytes" data_out/kjv.txt > data_out/kjv_val.txt
xz_bytes=$(xz -9e -c data_out/kjv_val.txt | wc -c)
bz_bytes=$(bzip2 -9 -c data_out/kjv_val.txt | wc -c)
gz_bytes=$(gzip -9 -c data_out/kjv_val.txt | wc -c)
model_bpb=$("$bin" eval --run runs/demo --split val | sed -n 's/.*| \([0-9.]*\) bits\/byte/\1/p')
/usr/bin/python3 - "$val_bytes" "$gz_bytes" "$xz_bytes" "$bz_bytes" "$model_bpb" <<'PY'
import sys
n, gz, xz, bz, model = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
print(f"\nbits per byte on the val text ({n} bytes, the last 10% of the KJV):")
for name, v in [("gzip -9", 8 * gz / n), ("xz -9e", 8 * xz / n), ("bzip2 -9", 8 * bz / n), ("ledgerlm demo", model)]:
    print(f"  {name:14s} {v:.3f}")
print("ledgerlm beats xz -9e" if model < 8 * xz / n else "ledgerlm does NOT beat xz -9e",
      "and bzip2 -9" if model < 8 * bz / n else "but not bzip2 -9")
PY
