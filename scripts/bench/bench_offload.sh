#!/usr/bin/env bash
# optim.offload = disk against none on a model whose AdamW state (fp32 master + m + v, 12 bytes
# per parameter) is most of its memory: L8 C512 (~27M parameters with the KJV tokenizer's
# vocabulary), bf16 weights and gradients, a few steps each. Prints per run the median step and
# optimizer ms over the steps after the first two, RssAnon and the in-memory peak the ledger
# predicted, the bytes on disk, the bytes moved per step and the I/O time the run's measured
# bandwidth predicts for them; then the device's own O_DIRECT figures (dd, 256 MiB) in the same
# directory, against which the run's bandwidth probe (page cache dropped) can be read.
#
#   scripts/bench/bench_offload.sh
#
# Environment: LEDGERLM_BIN (default build/ledgerlm), BENCH_STEPS (default 6), EXP_DATA (default
# data_out/kjv), OFFLOAD_DIR (default: a temp dir under runs' filesystem), STAGING_MB (64).
# Prints figures, never fails on timing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
script_start bench_offload
need_exec "$bin" "build first, or set LEDGERLM_BIN"
steps="${BENCH_STEPS:-6}"
data="${EXP_DATA:-data_out/kjv}"
staging="${STAGING_MB:-64}"
out="$(mktemp -d -p "$repo_root" .bench_offload.XXXXXX)"
trap 'rm -rf "$out"' EXIT
offload_dir="${OFFLOAD_DIR:-$out/state}"
common=(--data.dir "$data" --train.out_dir "$out" --model.n_layer 8 --model.n_head 8
  --model.n_embd 512 --model.block_size 128 --train.seq_len 128 --train.micro_batch 4
  --train.max_steps "$steps" --train.eval_interval 0 --train.eval_windows 4
  --train.log_interval 1 --precision.params bf16 --precision.grads bf16 --optim.name adamw)
for mode in none disk; do
  "$bin" train "${common[@]}" --train.name "$mode" --optim.offload "$mode" \
    --optim.offload_dir "$offload_dir" --optim.offload_staging_mb "$staging" > "$out/$mode.log"
done
python3 - "$out" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
print(f"{'offload':8} {'step_ms':>9} {'optim_ms':>9} {'RssAnon_MB':>11} {'pred_MB':>9} "
      f"{'disk_MB':>8} {'read_MB/step':>12} {'written_MB/step':>15} {'io_pred_ms':>10} {'stall_ms':>9}")
for mode in ("none", "disk"):
    recs = [json.loads(l) for l in open(f"{out}/{mode}/metrics.jsonl")]
    steps = [r for r in recs if "step_ms" in r][2:]
    led = json.load(open(f"{out}/{mode}/ledger.json"))
    meas, pred = led["measured"], led["predicted"]
    med = lambda k: statistics.median(r.get(k, 0.0) for r in steps)
    disk = pred.get("disk_per_rank_bytes", 0) / 1e6
    print(f"{mode:8} {med('step_ms'):9.1f} {med('optim_ms'):9.1f} "
          f"{meas['process']['rss_anon'] / 1e6:11.1f} {pred['per_rank_peak_bytes'] / 1e6:9.1f} "
          f"{disk:8.1f} {med('offload_read_bytes') / 1e6:12.1f} "
          f"{med('offload_written_bytes') / 1e6:15.1f} {med('offload_io_predicted_ms'):10.1f} "
          f"{med('offload_stall_ms'):9.1f}")
    if mode == "disk":
        bw = meas["disk"]["bandwidth"]
        print(f"run's probe (page cache dropped): write {bw['write_mb_s']:.0f} MB/s, "
              f"read {bw['read_mb_s']:.0f} MB/s")
EOF
mkdir -p "$offload_dir"
echo "dd O_DIRECT in $offload_dir (256 MiB, 4 MiB blocks):"
dd if=/dev/zero of="$offload_dir/dd.bin" bs=4M count=64 oflag=direct conv=fsync 2>&1 | tail -1 | sed 's/^/  write: /'
dd if="$offload_dir/dd.bin" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1 | sed 's/^/  read:  /'
rm -f "$offload_dir/dd.bin"
