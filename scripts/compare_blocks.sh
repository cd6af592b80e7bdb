#!/usr/bin/env bash
# GPT-2 block against Llama block against nanochat block at equal parameters and tokens on the
# default corpus: trains configs/compare/{gpt2,llama,nanochat}.toml with each seed (same data,
# same token budget), evaluates each run on the whole val split and prints a markdown table
# (scripts/compare_blocks_report.py): final val loss with its 95% t interval over the seeds,
# bits per byte, training tokens/s, peak tracked memory, and the differences llama - gpt2 and
# nanochat - gpt2 paired by seed.
#
# usage: scripts/compare_blocks.sh [--out DIR] [--seeds 1,2,3] [--max-tokens N] [--threads N]
#                                  [--report-only]
#   --out DIR        where the runs, their logs and REPORT.md go (default runs/compare_blocks)
#   --seeds LIST     comma-separated train.seed values (default 1,2,3)
#   --max-tokens N   the token budget of every run (default 655360: 320 steps of 16 x 128)
#   --threads N      CPU threads per run (default 2)
#   --report-only    train nothing: summarise the runs already in DIR
# Environment: LEDGERLM_BIN (default build/ledgerlm). A run that finished with this budget and
# has its evaluation is kept, not retrained, so an interrupted comparison resumes where it stopped.
# Runs go seed by seed (every block with seed 1, then seed 2, ...): stopped early, the seeds done
# are complete for all three blocks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/script_start.sh"
script_start compare_blocks

out=runs/compare_blocks
seeds=1,2,3
max_tokens=655360
threads=2
report_only=0
args=()
for a in "$@"; do [[ "$a" == --report-only ]] && report_only=1 || args+=("$a"); done
parse_options 2,19 out seeds max-tokens threads -- "${args[@]+"${args[@]}"}"
[[ ${#positional[@]} -eq 0 ]] || die "unexpected argument '${positional[0]}' (see --help)" 2

blocks=(gpt2 llama nanochat)
[[ "$seeds" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  die "--seeds must be comma-separated non-negative integers, got '$seeds'" 2
IFS=, read -r -a seed_list <<< "$seeds"
[[ $(printf '%s\n' "${seed_list[@]}" | sort -u | wc -l) -eq ${#seed_list[@]} ]] ||
  die "--seeds has a seed twice: '$seeds'" 2
# Whole steps of the configs' 16 x 128 tokens, so every run trains exactly the budget asked.
[[ "$max_tokens" =~ ^[1-9][0-9]*$ ]] && (( max_tokens % 2048 == 0 )) ||
  die "--max-tokens must be a positive multiple of 2048 (16 x 128 tokens a step), got '$max_tokens'" 2
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'" 2
[[ -z "$out" ]] && die "--out must name a directory" 2
[[ -e "$out" && ! -d "$out" ]] && die "--out $out exists and is not a directory" 2
python=/usr/bin/python3
need_exec "$python" "Debian's python3 with numpy and scipy"
need_python_module "$python" scipy "apt-get install python3-scipy"
for b in "${blocks[@]}"; do need_file "configs/compare/$b.toml" "the comparison's configs"; done
if (( report_only )); then
  [[ -d "$out" ]] || die "--report-only: $out does not exist" 2
  exec "$python" scripts/compare_blocks_report.py "$out"
fi
need_exec "$bin" "build the ledgerlm target, or set LEDGERLM_BIN"
need_default_corpus

mkdir -p "$out/logs"
# What the report prints beside the table: the command, the machine and its load at both ends
# (appended: a resumed comparison lists every invocation).
{
  echo "command: scripts/compare_blocks.sh --out $out --seeds $seeds --max-tokens $max_tokens --threads $threads"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
    "$(grep -m1 -ow 'avx512f\|avx512_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "uptime before: $(uptime)"
} >> "$out/environment.txt"

# finished NAME: the run trained this budget to the end and has its full-val evaluation.
finished() {
  [[ -s "$out/$1/eval_val.txt" && -f "$out/$1/summary.json" ]] &&
    "$python" - "$out/$1/summary.json" "$max_tokens" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if s.get("status") == "finished" and s.get("tokens") == int(sys.argv[2]) else 1)
EOF
}

failed=0
loads=()
for seed in "${seed_list[@]}"; do
  for b in "${blocks[@]}"; do
    name="${b}_seed$seed"
    if finished "$name"; then
      echo "$script: $name already finished, kept"
      continue
    fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    loads+=("$name $load")
    echo "$script: $(date +%T) training $name (1-min load average $load)"
    if ! "$bin" train --config "configs/compare/$b.toml" --train.seed "$seed" \
        --train.max_tokens "$max_tokens" --train.threads "$threads" \
        --train.out_dir "$out" --train.name "$name" --train.overwrite true \
        > "$out/logs/$name.train.log" 2>&1; then
      echo "$script: $name failed to train (see $out/logs/$name.train.log)" >&2
      failed=1
      continue
    fi
    grep '^done:' "$out/logs/$name.train.log" || true
    # The whole val split in windows of block_size; written beside the run once complete.
    if "$bin" eval --run "$out/$name" --split val --max-windows 0 --threads "$threads" \
        > "$out/logs/$name.eval.log" 2>&1; then
      cp "$out/logs/$name.eval.log" "$out/$name/eval_val.txt.tmp"
      mv "$out/$name/eval_val.txt.tmp" "$out/$name/eval_val.txt"
      grep '^loss' "$out/$name/eval_val.txt"
    else
      echo "$script: $name failed to evaluate (see $out/logs/$name.eval.log)" >&2
      failed=1
    fi
  done
done
{
  (( ${#loads[@]} )) && echo "1-min load average at each run's start: $(IFS=,; echo "${loads[*]}" | sed 's/,/, /g')"
  echo "uptime after: $(uptime)"
} >> "$out/environment.txt"

"$python" scripts/compare_blocks_report.py "$out"
exit "$failed"
