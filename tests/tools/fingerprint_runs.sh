#!/usr/bin/env bash
# Fingerprints the trainer's arithmetic: runs a fixed matrix of short trainings with one ledgerlm
# binary and writes, per run, SHA-256 hashes of what the run computed. A change that is meant to
# move code without changing arithmetic (a refactoring of the model state, the ZeRO sharding, the
# optimizer plumbing) must leave every hash as it was: run this with the binary of the base
# commit and with the changed one, on the same machine, and compare the two tables.
#
#   tests/tools/fingerprint_runs.sh --bin PATH --work DIR [--text FILE] [--matrix M] [--only RE] OUT.tsv
#   tests/tools/fingerprint_runs.sh --compare A.tsv B.tsv [--only RE]
#
# --only RE (a bash regular expression) runs, or compares, only the runs whose names match: a
# subset to re-run against a full table (`--only '_lion_'`).
#
# Two matrices (--matrix): `classic` (the default), the arithmetic of the model state, ZeRO and
# precision paths at worlds 2 and 4, below; and `wide`, every optimizer and what a run writes
# besides its arithmetic (exports, the ledger, the placement), after it.
#
# The classic matrix (global batch 8 sequences, 6 steps, an evaluation at steps 3 and 6,
# checkpoints at steps 3 and 6; a tiny model: configs/tiny_test.toml with n_embd 64, T 32):
#   - world 2 and 4 under mpirun (1 thread per rank) x dist.zero 0-3 x optim.name adamw,
#     adamw8bit, adafactor x precision
#       bf16: bf16 params, fp32 grads, fp32 master;
#       fp16: fp16 params and grads, dynamic loss scaling from 2^18 growing every 2 good steps
#             (without accumulation a few steps overflow and are skipped, then the scale grows
#             again; with accumulation fp32 accumulates, so it only grows);
#     accumulation 2 where exactly one of (world 4, fp16) holds, 1 otherwise, so every stage,
#     optimizer and precision runs with and without accumulation (48 runs);
#   - the same optimizers and precisions on one process with 2 threads (6 runs);
#   - extra paths of the model state under mpirun: fp32 params (no master), master none with
#     stochastic rounding, bf16 optimizer state, ZeRO-3 keeping gathered weights after forward,
#     activation recompute (mlp, block) with dropout, lamb, lars, sgd (10 runs);
#   - configs/demo.toml (on a BPE-4096 copy of the corpus), configs/bench_tiny.toml and
#     configs/bench_small.toml (vocab from the data), 2 threads, a few steps each (3 runs).
#
# The wide matrix (the same tiny model and data, global batch 8 sequences, 4 steps, evaluations
# and checkpoints at steps 2 and 4), 258 runs:
#   - world 2 under mpirun: every optimizer (sgd, adamw, lamb, lars, adafactor, adamw8bit, lion,
#     adamw_schedulefree (optim.schedule constant: it refuses a schedule), ademamix, muon) x
#     precision fp32 | bf16 (bf16 params, fp32 grads and master) x model.recompute none | mlp |
#     block (with dropout 0.1 where it recomputes, and accumulation 2 with mlp) x dist.zero 0-3
#     (240 runs);
#   - train.freeze (world 1 and world 2 ZeRO-3), LoRA (world 1 on every target, world 2 ZeRO-2
#     bf16), optim.offload = disk (adamw, adafactor bf16 on one process; lamb ZeRO-1, muon ZeRO-3
#     bf16 at world 2), and every optimizer on one process with 2 threads at bf16 (16 runs).
#   Besides the classic columns, each row has:
#   ckpt_files_sha256  every checkpoint kept (steps 2 and 4): each *.safetensors file's bytes
#   ckpt_meta_sha256   each checkpoint's meta.json with its times, the process's RSS, its own CRC
#                      and the config text left out (the config gains keys as ledgerlm grows;
#                      the run's arithmetic is in the other columns)
#   hf_sha256          `ledgerlm export --format hf`: every file of the export (the work dir
#                      in a file reads $WORK, so tables made in two work dirs compare)
#   peft_sha256        `ledgerlm export --lora-only` (LoRA runs; `-` for the others)
#   ledger_pred_sha256 ledger.json's prediction (components, bytes, dtypes, placements; its notes,
#                      words for the reader, are left out)
#   ledger_meas_sha256 the tracked bytes measured per component (current, peak, predicted, where):
#                      ledger.json's and every step record's of metrics.jsonl; RSS and times
#                      (keys ending in _s, _ms, seconds: the disk offload's I/O) left out
#   tensors_sha256     `ledgerlm memory --config runs/NAME/config.toml --tensors` for every rank:
#                      the per-tensor placement and optimizer state
#   A run the binary refuses (exit 1 with one `ledgerlm: error:` line) is a row too: its
#   losses_sha256 is `refused:` and the hash of that line, the other cells `-`.
#   OUT.tsv.items lists what each column hashed (run, column, item, SHA-256); --compare prints the
#   items that differ when both tables have it, and the reduced texts stay under DIR/reduced/NAME
#   for diffing. Takes about 7 minutes on 2 idle cores (34 on a machine shared with builds).
#
# Data: the first 600000 bytes of the King James Bible (Debian's bible-kjv, as
# scripts/prepare_default.sh extracts it) or of --text FILE, prepared by the binary under test
# with the bytes tokenizer and with a 4096-piece BPE.
#
# OUT.tsv: `#` lines first (#machine: the CPU, kernel path and GEMM libraries from the first
# run's metrics.jsonl; #input: SHA-256 of the prepared data's files and of the configs used;
# #bin, #date, #elapsed_s: for the reader, not compared), then a header and one row per run:
#   run            the run's name (runs/NAME under the work dir)
#   losses_sha256  SHA-256 of metrics.jsonl reduced to the fields step, tokens, loss, val_loss,
#                  val_bpb, val_ppl, grad_norm, lr, loss_scale, skipped_steps of every record
#                  that has a loss or val_loss, one JSON object per record with sorted keys
#                  (Python's float repr: exact); the reduced text is kept in DIR/losses/NAME.jsonl
#                  for diffing. Wall times, tokens/s, memory and the summary record are left out.
#   final_loss     summary.json's final_loss
#   last_ckpt      the last checkpoint's directory (ckpt/step_NNNNNN)
#   ckpt_model_sha256, ckpt_compute_sha256, ckpt_optimizer_sha256
#                  SHA-256 of the last checkpoint's model, compute and optimizer safetensors
#                  (`-` where the run has no such file: compute exists only with a separate
#                  master); meta.json is left out (it holds save times)
#   weights_sha256 SHA-256 of runs/NAME/model.safetensors
# Every field is reproducible: two runs of one binary gave the same table (checked on a 2-core
# Xeon, avx512 path), so no field of the files above had to be left out. Runs are not bitwise
# equal across ZeRO stages (stage 0 sums the gradient norm in another order than 1-3; ZeRO-2/3
# with accumulation reduce-scatter each micro-batch), nor across worlds: each row is compared
# only with the same row of another table.
#
# --compare prints `same` or `DIFFERENT` per run (and per #input line), and exits 1 on any
# difference, a run present in one table only (of those --only names), or tables made on
# different machines.
#
# The figures are machine-specific: the CPU backend takes the best kernel path the CPU allows
# (avx512, avx2, portable: LEDGERLM_CPU_ISA forces one) and GEMM libraries per path, and results
# are bitwise reproducible only for the same path, libraries and thread count (fixed here). Only
# compare tables made on the same machine; #machine says where a table was made.
# Takes about 70 s on 2 cores (67 runs of 1 s or so each: mpirun's start is much of that).
#
# Environment: OMP and MPI settings are fixed by the script; LEDGERLM_CPU_ISA and
# LEDGERLM_CPU_GEMM are passed through (the path shows in #machine).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset LEDGERLM_TEST_CKPT_KILL OMP_NUM_THREADS OPENBLAS_NUM_THREADS

fail() {
  echo "fingerprint_runs: error: $*" >&2
  exit 1
}
usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}

# compare A.tsv B.tsv: runs matched by name; #machine must agree; #input lines compared.
compare() {
  [[ -f "$1" ]] || fail "$1 not found"
  [[ -f "$2" ]] || fail "$2 not found"
  "$py" - "$1" "$2" "$3" <<'EOF'
import sys

def load(path):
    meta, inputs, rows, order = {}, {}, {}, []
    header = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("#"):
                key, _, value = line[1:].partition("\t")
                if key == "input":
                    name, _, h = value.partition("\t")
                    inputs[name] = h
                else:
                    meta[key] = value
                continue
            cells = line.split("\t")
            if header is None:
                header = cells
                continue
            if len(cells) != len(header):
                sys.exit(f"fingerprint_runs: error: {path}: a row with {len(cells)} cells, "
                         f"the header has {len(header)}: {line}")
            rows[cells[0]] = dict(zip(header, cells))
            order.append(cells[0])
    if header is None or header[0] != "run":
        sys.exit(f"fingerprint_runs: error: {path}: not a fingerprint table (no header)")
    return meta, inputs, header, rows, order

def load_items(path):
    """run -> column -> {item: sha}, from the table's .items file; None without one."""
    try:
        f = open(path + ".items", encoding="utf-8")
    except FileNotFoundError:
        return None
    items = {}
    with f:
        for line in f:
            run, column, item, h = line.rstrip("\n").split("\t")
            items.setdefault(run, {}).setdefault(column, {})[item] = h
    return items

a_path, b_path, only = sys.argv[1], sys.argv[2], sys.argv[3]
items_a, items_b = load_items(a_path), load_items(b_path)
ma, ia, ha, ra, oa = load(a_path)
mb, ib, hb, rb, ob = load(b_path)
if only:
    import re
    pick = re.compile(only)
    ra = {n: r for n, r in ra.items() if pick.search(n)}
    rb = {n: r for n, r in rb.items() if pick.search(n)}
    oa = [n for n in oa if n in ra]
    ob = [n for n in ob if n in rb]
bad = 0
if ma.get("matrix", "classic") != mb.get("matrix", "classic"):
    print(f"matrix DIFFERENT: {ma.get('matrix', 'classic')} against {mb.get('matrix', 'classic')}")
    sys.exit(1)
if ma.get("machine") != mb.get("machine"):
    print("machine DIFFERENT: the tables were made on different machines or kernel paths "
          "and cannot be compared")
    print(f"  A: {ma.get('machine')}\n  B: {mb.get('machine')}")
    sys.exit(1)
if ha != hb:
    print(f"columns DIFFERENT: {ha} against {hb}")
    sys.exit(1)
for name in list(ia) + [n for n in ib if n not in ia]:
    if name not in ia or name not in ib:
        print(f"input {name}: only in {'A' if name in ia else 'B'}")
        bad += 1
    elif ia[name] != ib[name]:
        print(f"input {name}: DIFFERENT")
        bad += 1
    else:
        print(f"input {name}: same")
for name in oa + [n for n in ob if n not in ra]:
    if name not in ra or name not in rb:
        print(f"{name}: only in {'A' if name in ra else 'B'}")
        bad += 1
        continue
    diff = [c for c in ha[1:] if ra[name][c] != rb[name][c]]
    if diff:
        print(f"{name}: DIFFERENT ({', '.join(diff)})")
        bad += 1
        if items_a is not None and items_b is not None:
            for c in diff:
                ca = items_a.get(name, {}).get(c, {})
                cb = items_b.get(name, {}).get(c, {})
                for item in list(ca) + [i for i in cb if i not in ca]:
                    if ca.get(item) != cb.get(item):
                        which = ("only in A" if item not in cb else
                                 "only in B" if item not in ca else "DIFFERENT")
                        print(f"  {c}: {item}: {which}")
    else:
        print(f"{name}: same")
total = len(set(ra) | set(rb))
print(f"{total - sum(1 for n in set(ra) | set(rb) if n not in ra or n not in rb or ra[n] != rb[n])}"
      f" of {total} runs same; {bad} difference(s)")
sys.exit(1 if bad else 0)
EOF
}

bin="" work="" text="" out="" matrix=classic only=""
if [[ ${1:-} == --compare ]]; then
  if (($# == 5)) && [[ $4 == --only ]]; then
    only=$5
  elif (($# != 3)); then
    fail "--compare takes two tables: --compare A.tsv B.tsv [--only RE]"
  fi
  compare "$2" "$3" "$only"
  exit $?
fi
while (($# > 0)); do
  case $1 in
    --compare) fail "--compare comes first: --compare A.tsv B.tsv [--only RE]" ;;
    --only) (($# >= 2)) || fail "--only needs a regular expression"; only=$2; shift 2 ;;
    --bin) (($# >= 2)) || fail "--bin needs a path"; bin=$2; shift 2 ;;
    --work) (($# >= 2)) || fail "--work needs a directory"; work=$2; shift 2 ;;
    --text) (($# >= 2)) || fail "--text needs a file"; text=$2; shift 2 ;;
    --matrix)
      (($# >= 2)) || fail "--matrix needs a name: classic | wide"
      [[ $2 == classic || $2 == wide ]] || fail "--matrix '$2': expected classic or wide"
      matrix=$2
      shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) fail "unknown option '$1' (--help)" ;;
    *) [[ -z "$out" ]] || fail "one output table only (got '$out' and '$1')"; out=$1; shift ;;
  esac
done
if [[ -z "$bin" || -z "$work" || -z "$out" ]]; then
  echo "usage: $0 --bin PATH --work DIR [--text FILE] [--matrix classic|wide] [--only RE] OUT.tsv | --compare A.tsv B.tsv [--only RE] (--help)" >&2
  exit 2
fi
[[ -x "$bin" ]] || fail "$bin not found or not executable"
command -v mpirun >/dev/null || fail "mpirun not found (scripts/setup.sh installs openmpi-bin)"
[[ -x "$py" ]] || fail "$py not found"
bin="$(realpath "$bin")"
out="$(realpath -m "$out")"
[[ -z "$text" ]] || text="$(realpath "$text")"
mkdir -p "$(dirname "$out")"

# The work dir is ours: new, empty, or one this script made before (then emptied).
if [[ -e "$work" ]]; then
  [[ -d "$work" ]] || fail "--work $work is not a directory"
  if [[ -n "$(ls -A "$work")" && ! -f "$work/.fingerprint_runs" ]]; then
    fail "--work $work is not empty and was not made by this script (choose another)"
  fi
fi
mkdir -p "$work"
work="$(realpath "$work")"
case "$out" in "$work"/*) fail "the output table must not be inside --work (it is emptied)" ;; esac
find "$work" -mindepth 1 -delete
touch "$work/.fingerprint_runs"
cd "$work"
mkdir -p data runs logs losses reduced exports
: >items.tsv
start=$(date +%s)

# Corpus and data, prepared by the binary under test.
if [[ -n "$text" ]]; then
  head -c 600000 "$text" >corpus.txt
else
  command -v bible >/dev/null || fail "the 'bible' command is missing (apt-get install bible-kjv), or give --text FILE"
  bible -f "Gen1:1-Rev22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' >kjv.txt
  head -c 600000 kjv.txt >corpus.txt
  rm kjv.txt
fi
(($(wc -c <corpus.txt) == 600000)) || fail "the corpus has fewer than 600000 bytes"
"$bin" prepare --input corpus.txt --tokenizer bytes --val-fraction 0.1 --out data/bytes \
  >logs/prepare_bytes.log 2>&1 || { tail -5 logs/prepare_bytes.log >&2; fail "prepare (bytes) failed"; }
if [[ $matrix == classic ]]; then
  "$bin" prepare --input corpus.txt --vocab-size 4096 --val-fraction 0.1 --out data/bpe \
    >logs/prepare_bpe.log 2>&1 || { tail -5 logs/prepare_bpe.log >&2; fail "prepare (bpe) failed"; }
fi

sha() { sha256sum "$1" | cut -d' ' -f1; }

rows=()
machine=""

# record NAME: appends the run's row (see the header) and keeps its reduced metrics.
record() {
  local name=$1 dir="runs/$1"
  [[ -f "$dir/summary.json" ]] || fail "$name: no summary.json (see $work/logs/$name.log)"
  "$py" - "$dir/metrics.jsonl" "losses/$name.jsonl" <<'EOF'
import json, sys
keys = ("step", "tokens", "loss", "val_loss", "val_bpb", "val_ppl", "grad_norm", "lr",
        "loss_scale", "skipped_steps")
out = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        rec = json.loads(line)
        if rec.get("summary") or ("loss" not in rec and "val_loss" not in rec):
            continue
        out.append(json.dumps({k: rec[k] for k in keys if k in rec}, sort_keys=True))
if not out:
    sys.exit(f"fingerprint_runs: error: {sys.argv[1]}: no loss records")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write("\n".join(out) + "\n")
EOF
  if [[ -z "$machine" ]]; then
    machine="$("$py" -c '
import json, sys
b = json.loads(open(sys.argv[1], encoding="utf-8").readline())["backend"]
print(" | ".join(b[k] for k in ("cpu", "path", "gemm", "kernels")))' "$dir/metrics.jsonl")"
  fi
  local final ckpt f row
  final="$("$py" -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["final_loss"]))' \
    "$dir/summary.json")"
  local -a steps=("$dir"/ckpt/step_*)  # zero-padded: the glob's order is the steps' order
  [[ -d "${steps[-1]}" ]] || fail "$name: no checkpoint"
  ckpt="${steps[-1]##*/}"
  [[ "$(cat "$dir/ckpt/latest")" == "$ckpt" ]] || fail "$name: ckpt/latest is not $ckpt"
  row="$name	$(sha "losses/$name.jsonl")	$final	ckpt/$ckpt"
  for f in model compute optimizer; do
    if [[ -f "$dir/ckpt/$ckpt/$f.safetensors" ]]; then
      row+="	$(sha "$dir/ckpt/$ckpt/$f.safetensors")"
    else
      row+="	-"
    fi
  done
  row+="	$(sha "$dir/model.safetensors")"
  if [[ $matrix == wide ]]; then
    local extra
    extra="$(record_wide "$name")" || exit 1
    row+="	$extra"
  fi
  rows+=("$row")
}

# record_wide NAME: the wide matrix's cells of a finished run (see the header), tab-separated:
# exports and the placement tables made here by the binary under test, then everything reduced
# and hashed; what each cell hashed is appended to items.tsv.
record_wide() {
  local name=$1 dir="runs/$1" world rank lora
  world="$(<"logs/$name.world")"
  mkdir -p "reduced/$name"
  "$bin" export --run "$dir" --format hf --out "exports/$name/hf" >>"logs/$name.log" 2>&1 ||
    fail "$name: export failed (log: $work/logs/$name.log)"
  lora="$(sed -n '/^\[lora\]/,/^\[/ s/^rank = //p' "$dir/config.toml")"
  if [[ -n "$lora" && "$lora" != 0 ]]; then
    "$bin" export --run "$dir" --lora-only --out "exports/$name/peft" >>"logs/$name.log" 2>&1 ||
      fail "$name: export --lora-only failed (log: $work/logs/$name.log)"
  fi
  for ((rank = 0; rank < world; rank++)); do
    "$bin" memory --config "$dir/config.toml" --world "$world" --tensors --rank "$rank" \
      >"reduced/$name/tensors_rank$rank.txt" 2>>"logs/$name.log" ||
      fail "$name: memory --tensors --rank $rank failed (log: $work/logs/$name.log)"
  done
  "$py" - "$name" "$work" <<'EOF'
import glob, hashlib, json, os, sys

name, work = sys.argv[1], sys.argv[2]
run, red = os.path.join("runs", name), os.path.join("reduced", name)
items = []

def sha_bytes(b):
    return hashlib.sha256(b).hexdigest()

def sha_file(path):
    with open(path, "rb") as f:
        return sha_bytes(f.read())

def sha_export(path):
    """An export's file; the work dir in it (PEFT's base_model_name_or_path) reads $WORK."""
    with open(path, "rb") as f:
        return sha_bytes(f.read().replace(work.encode(), b"$WORK"))

def cell(column, named):
    """One column: the hash of its items' (name, hash) list; `-` when it has none."""
    if not named:
        return "-"
    for item, h in named:
        items.append(f"{name}\t{column}\t{item}\t{h}")
    return sha_bytes("".join(f"{i}\t{h}\n" for i, h in named).encode())

def keep(path, obj):
    """Writes obj as canonical JSON (sorted keys; Python's float repr: exact) and hashes it."""
    text = (json.dumps(obj, sort_keys=True, indent=1) + "\n").encode()
    with open(os.path.join(red, path), "wb") as f:
        f.write(text)
    return sha_bytes(text)

TIMES = ("_s", "_ms", "seconds")  # durations and rates (read_mb_s): not reproducible

def strip(obj, drop):
    if isinstance(obj, dict):
        return {k: strip(v, drop) for k, v in obj.items()
                if k not in drop and not k.endswith(TIMES)}
    if isinstance(obj, list):
        return [strip(v, drop) for v in obj]
    return obj

def tracked(mem):
    """The tracked components of a `mem` record: bytes and where, not the process's RSS."""
    return {k: v for k, v in mem.items() if k != "process"}

cells = []
ckpts = sorted(glob.glob(os.path.join(run, "ckpt", "step_*")))
cells.append(cell("ckpt_files_sha256", [
    (os.path.relpath(f, run), sha_file(f))
    for c in ckpts for f in sorted(glob.glob(os.path.join(c, "*.safetensors")))]))
metas = []
for c in ckpts:
    with open(os.path.join(c, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    meta = strip(meta, ("config", "config_toml", "meta_crc32c", "process"))
    metas.append((os.path.relpath(c, run) + "/meta.json",
                  keep(os.path.basename(c) + "_meta.json", meta)))
cells.append(cell("ckpt_meta_sha256", metas))
for kind in ("hf", "peft"):
    out = os.path.join("exports", name, kind)
    files = sorted(glob.glob(os.path.join(out, "*"))) if os.path.isdir(out) else []
    cells.append(cell(kind + "_sha256", [(os.path.basename(f), sha_export(f)) for f in files]))
with open(os.path.join(run, "ledger.json"), encoding="utf-8") as f:
    ledger = json.load(f)
cells.append(cell("ledger_pred_sha256", [
    ("ledger.json predicted", keep("ledger_predicted.json",
                                   strip(ledger["predicted"], ("notes",))))]))
steps = []
with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
    for line in f:
        rec = json.loads(line)
        if "mem" in rec and not rec.get("summary"):
            steps.append({"step": rec.get("step"), "mem": strip(tracked(rec["mem"]), ())})
cells.append(cell("ledger_meas_sha256", [
    ("ledger.json measured", keep("ledger_measured.json",
                                  strip(tracked(ledger["measured"]), ()))),
    ("metrics.jsonl mem", keep("metrics_mem.json", steps))]))
cells.append(cell("tensors_sha256", [
    (os.path.basename(f), sha_file(f))
    for f in sorted(glob.glob(os.path.join(red, "tensors_rank*.txt")))]))
with open("items.tsv", "a", encoding="utf-8") as f:
    f.write("".join(i + "\n" for i in items))
print("\t".join(cells))
EOF
}

# refused NAME: the row of a run the binary refused with a `ledgerlm: error:` line (the wide
# matrix only); 1 when the log has none (a crash, not a refusal).
refused() {
  local name=$1 line
  line="$(grep -m1 '^ledgerlm: error: ' "logs/$name.log")" || return 1
  printf '%s\t%s\n' "$name" "$line" >>refused.tsv
  rows+=("$name	refused:$(printf '%s' "$line" | sha256sum | cut -d' ' -f1)$(printf '\t-%.0s' {1..13})")
}

# run NAME WORLD CONFIG [FLAGS...]: one training (WORLD 1: 2 threads; more: mpirun, 1 thread per
# rank), then its row; nothing for a name --only does not match.
run() {
  local name=$1 world=$2 config=$3
  shift 3
  [[ -z "$only" || $name =~ $only ]] || return 0
  local -a cmd
  if ((world == 1)); then
    cmd=(env OMP_NUM_THREADS=2 "$bin" train --config "$config" --train.threads 2)
  else
    cmd=(mpirun --allow-run-as-root --oversubscribe -np "$world" -x OMP_NUM_THREADS=1
      -x OMP_WAIT_POLICY=PASSIVE "$bin" train --config "$config" --train.threads 1)
  fi
  cmd+=(--train.out_dir runs --train.name "$name" "$@")
  printf '%q ' "${cmd[@]}" >"logs/$name.log"
  echo >>"logs/$name.log"
  echo "$world" >"logs/$name.world"
  if ! "${cmd[@]}" >>"logs/$name.log" 2>&1 </dev/null; then
    if [[ $matrix == wide ]] && refused "$name"; then
      echo "fingerprint_runs: $name refused" >&2
      return 0
    fi
    tail -5 "logs/$name.log" >&2
    fail "$name failed (log: $work/logs/$name.log)"
  fi
  record "$name"
  echo "fingerprint_runs: $name" >&2
}

tiny="$repo_root/configs/tiny_test.toml"
tiny_flags=(--data.dir data/bytes --model.n_layer 2 --model.n_head 2 --model.n_embd 64
  --model.block_size 32 --train.seq_len 32 --train.max_steps 6 --train.max_seconds 0
  --train.eval_interval 3 --train.eval_windows 8 --train.log_interval 1 --ckpt.interval 3
  --optim.warmup_steps 2)
bf16_flags=(--precision.params bf16 --precision.grads fp32 --precision.master fp32)
fp16_flags=(--precision.params fp16 --precision.grads fp16 --precision.master fp32
  --precision.loss_scale dynamic --precision.init_scale 262144 --precision.growth_interval 2)

# tiny NAME WORLD ACCUM PREC OPTIM [FLAGS...]: the tiny model, global batch 8 sequences.
tiny() {
  local name=$1 world=$2 accum=$3 prec=$4 optim=$5
  shift 5
  local -a pflags
  case $prec in
    bf16) pflags=("${bf16_flags[@]}") ;;
    fp16) pflags=("${fp16_flags[@]}") ;;
    fp32) pflags=(--precision.params fp32 --precision.grads fp32) ;;
  esac
  run "$name" "$world" "$tiny" "${tiny_flags[@]}" --train.micro_batch $((8 / (world * accum))) \
    --train.accum "$accum" --optim.name "$optim" "${pflags[@]}" "$@"
}

# wide_run NAME WORLD ACCUM PREC OPTIM [FLAGS...]: the wide matrix's tiny model (4 steps,
# evaluations and checkpoints at steps 2 and 4), global batch 8 sequences.
wide_run() {
  local name=$1 world=$2 accum=$3 prec=$4 optim=$5
  shift 5
  local -a pflags
  case $prec in
    bf16) pflags=("${bf16_flags[@]}") ;;
    fp32) pflags=(--precision.params fp32 --precision.grads fp32) ;;
  esac
  # Schedule-free AdamW replaces the LR schedule and refuses any but constant.
  [[ $optim != adamw_schedulefree ]] || pflags+=(--optim.schedule constant)
  run "$name" "$world" "$tiny" --data.dir data/bytes --model.n_layer 2 --model.n_head 2 \
    --model.n_embd 64 --model.block_size 32 --train.seq_len 32 --train.max_steps 4 \
    --train.max_seconds 0 --train.eval_interval 2 --train.eval_windows 8 --train.log_interval 1 \
    --ckpt.interval 2 --optim.warmup_steps 2 --train.micro_batch $((8 / (world * accum))) \
    --train.accum "$accum" --optim.name "$optim" "${pflags[@]}" "$@"
}

wide_optims=(sgd adamw lamb lars adafactor adamw8bit lion adamw_schedulefree ademamix muon)

wide_matrix() {
  local optim prec recompute zero accum
  for optim in "${wide_optims[@]}"; do
    for prec in fp32 bf16; do
      for recompute in none mlp block; do
        local -a rflags=(--model.recompute "$recompute")
        accum=1
        [[ $recompute == none ]] || rflags+=(--model.dropout 0.1)
        if [[ $recompute == mlp ]]; then accum=2; fi
        for zero in 0 1 2 3; do
          wide_run "w2_z${zero}_${optim}_${prec}_rc${recompute}" 2 "$accum" "$prec" "$optim" \
            --dist.zero "$zero" "${rflags[@]}"
        done
      done
    done
  done
  for optim in "${wide_optims[@]}"; do
    wide_run "w1_${optim}_bf16" 1 1 bf16 "$optim"
  done
  wide_run w1_adamw_fp32_freeze 1 1 fp32 adamw --train.freeze 'embed.*,block.0.*'
  wide_run w2_z3_lamb_bf16_freeze 2 1 bf16 lamb --dist.zero 3 --train.freeze 'block.1.mlp.*'
  wide_run w1_adamw_fp32_lora 1 1 fp32 adamw --lora.rank 4 --lora.alpha 8 \
    --lora.targets qkv,attn_proj,mlp_fc,mlp_proj
  wide_run w2_z2_lion_bf16_lora 2 1 bf16 lion --dist.zero 2 --lora.rank 4 --lora.dropout 0.1
  wide_run w1_adamw_fp32_offload_disk 1 1 fp32 adamw --optim.offload disk
  wide_run w1_adafactor_bf16_offload_disk 1 1 bf16 adafactor --optim.offload disk
  wide_run w2_z1_lamb_fp32_offload_disk 2 1 fp32 lamb --dist.zero 1 --optim.offload disk
  wide_run w2_z3_muon_bf16_offload_disk 2 1 bf16 muon --dist.zero 3 --optim.offload disk
}

classic_matrix() {
  for world in 2 4; do
    for zero in 0 1 2 3; do
      for optim in adamw adamw8bit adafactor; do
        for prec in bf16 fp16; do
          # accumulation 2 where exactly one of (world 4, fp16) holds
          w4=0 f16=0
          [[ $world == 4 ]] && w4=1
          [[ $prec == fp16 ]] && f16=1
          accum=$(((w4 ^ f16) + 1))
          tiny "w${world}_z${zero}_${optim}_${prec}_a${accum}" "$world" "$accum" "$prec" "$optim" \
            --dist.zero "$zero"
        done
      done
    done
  done
  for optim in adamw adamw8bit adafactor; do
    tiny "w1_${optim}_bf16_a1" 1 1 bf16 "$optim"
    tiny "w1_${optim}_fp16_a2" 1 2 fp16 "$optim"
  done
  tiny w2_z1_adamw_fp32_a1 2 1 fp32 adamw --dist.zero 1
  tiny w4_z3_adamw_fp32_a2 4 2 fp32 adamw --dist.zero 3
  tiny w2_z3_adamw_bf16_nomaster_a1 2 1 bf16 adamw --dist.zero 3 --precision.master none \
    --precision.rounding stochastic
  tiny w4_z2_adamw_bf16_bf16state_a2 4 2 bf16 adamw --dist.zero 2 --precision.state bf16
  tiny w2_z3_adamw_bf16_keepgathered_a2 2 2 bf16 adamw --dist.zero 3 \
    --dist.reshard_after_forward false
  tiny w4_z3_adamw_bf16_recompute_block_dropout_a2 4 2 bf16 adamw --dist.zero 3 \
    --model.recompute block --model.dropout 0.1
  tiny w2_z2_adamw_fp16_recompute_mlp_dropout_a1 2 1 fp16 adamw --dist.zero 2 \
    --model.recompute mlp --model.dropout 0.1
  tiny w2_z3_lamb_bf16_a1 2 1 bf16 lamb --dist.zero 3
  tiny w4_z1_lars_bf16_a2 4 2 bf16 lars --dist.zero 1
  tiny w2_z2_sgd_bf16_nesterov_a2 2 2 bf16 sgd --dist.zero 2 --optim.nesterov true
  run demo 1 "$repo_root/configs/demo.toml" --data.dir data/bpe --train.max_steps 4 \
    --train.max_seconds 0 --train.eval_interval 0 --train.log_interval 1
  run bench_tiny 1 "$repo_root/configs/bench_tiny.toml" --data.dir data/bytes \
    --model.vocab_size 0 --train.max_steps 5 --train.eval_interval 0 --train.eval_windows 16 \
    --train.log_interval 1
  run bench_small 1 "$repo_root/configs/bench_small.toml" --data.dir data/bytes \
    --model.vocab_size 0 --train.max_steps 3 --train.eval_interval 0 --train.eval_windows 8 \
    --train.log_interval 1
}

if [[ $matrix == classic ]]; then
  classic_matrix
else
  wide_matrix
fi

elapsed=$(($(date +%s) - start))
{
  printf '#machine\t%s\n' "$machine"
  [[ $matrix == classic ]] || printf '#matrix\t%s\n' "$matrix"
  [[ -z "$only" ]] || printf '#only\t%s\n' "$only"
  for f in bytes/train.bin bytes/val.bin bytes/meta.json; do
    printf '#input\tdata/%s\t%s\n' "$f" "$(sha "data/$f")"
  done
  if [[ $matrix == classic ]]; then
    for f in bpe/train.bin bpe/val.bin bpe/tokenizer.model bpe/meta.json; do
      printf '#input\tdata/%s\t%s\n' "$f" "$(sha "data/$f")"
    done
    for f in tiny_test demo bench_tiny bench_small; do
      printf '#input\tconfigs/%s.toml\t%s\n' "$f" "$(sha "$repo_root/configs/$f.toml")"
    done
  else
    printf '#input\tconfigs/tiny_test.toml\t%s\n' "$(sha "$tiny")"
  fi
  printf '#bin\t%s\t%s\n' "$bin" "$(sha "$bin")"
  printf '#date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf '#elapsed_s\t%s\n' "$elapsed"
  printf 'run\tlosses_sha256\tfinal_loss\tlast_ckpt\tckpt_model_sha256\tckpt_compute_sha256\tckpt_optimizer_sha256\tweights_sha256'
  if [[ $matrix == wide ]]; then
    printf '\tckpt_files_sha256\tckpt_meta_sha256\thf_sha256\tpeft_sha256\tledger_pred_sha256'
    printf '\tledger_meas_sha256\ttensors_sha256'
  fi
  printf '\n'
  printf '%s\n' "${rows[@]}"
} >"$out.tmp"
if [[ $matrix == wide ]]; then
  cp items.tsv "$out.items.tmp"
  mv "$out.items.tmp" "$out.items"
fi
mv "$out.tmp" "$out"
echo "fingerprint_runs: ${#rows[@]} runs in ${elapsed} s -> $out" >&2
