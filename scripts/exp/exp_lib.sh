# Shared by the experiment scripts (scripts/exp/exp_global_batch.sh, scripts/exp/exp_optimizers.sh):
# sourced, not run. Provides the environment every experiment reads, the data, one training run
# (single process or under mpirun) recorded in the experiment's manifest, and the hand-off to the
# report. Each script sets exp_name before sourcing this file, and sources it with its own
# arguments in place (bash passes them on).
#
# Options:
#   --size SIZE   smoke | default | small | medium (default: EXP_SIZE, else default). smoke is
#                 a minimal size for CI (tiny model, few steps; the same tables); small and
#                 medium train bigger models on more tokens than the default (see each script)
#
# Environment:
#   LEDGERLM_BIN  the ledgerlm binary (default build/ledgerlm)
#   EXP_SIZE      the size when --size is not given
#   EXP_DATA      prepared data directory (default data_out/kjv, prepared if missing)
#   EXP_OUT       output directory (default runs/exp_NAME): runs/, manifest.tsv, REPORT.md, PNGs
#   EXP_THREADS   CPU threads of a single-process run (default 2); ranks under mpirun use 1 each
#   EXP_SEEDS     seeds, space-separated (default "1 2"; at least 2: the seed spread is the yardstick)
#   EXP_PUBLISH   where the report of record goes (default results/NAME at the default size, none
#                 at the other sizes; empty: none): REPORT.md, the PNGs, manifest.tsv, params.tsv
#                 and each run's summary.json, config.toml and metrics.jsonl gzipped (no weights,
#                 no checkpoints), so tests/tools/check_exp_report.py can check the published copy
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
bin="${LEDGERLM_BIN:-build/ledgerlm}"
size="${EXP_SIZE:-default}"
while (($# > 0)); do
  case $1 in
    --size) (($# >= 2)) || { echo "exp_$exp_name: error: --size needs a value" >&2; exit 2; }
      size=$2; shift 2 ;;
    --size=*) size=${1#--size=}; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "exp_$exp_name: error: unknown argument '$1' (--size smoke|default|small|medium)" >&2
      exit 2 ;;
  esac
done
data="${EXP_DATA:-data_out/kjv}"
out="${EXP_OUT:-runs/exp_$exp_name}"
threads="${EXP_THREADS:-2}"
read -r -a seeds <<<"${EXP_SEEDS:-1 2}"
if [[ "$size" == default ]]; then publish="${EXP_PUBLISH-results/$exp_name}"; else publish="${EXP_PUBLISH:-}"; fi
py=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

exp_fail() {
  echo "exp_$exp_name: error: $*" >&2
  exit 1
}

case $size in smoke | default | small | medium) ;; *)
  exp_fail "the size must be smoke, default, small or medium, not '$size'" ;; esac
((${#seeds[@]} >= 2)) || exp_fail "EXP_SEEDS needs at least 2 seeds (the seed spread is the yardstick)"
[[ -x "$bin" ]] || exp_fail "$bin not found or not executable (build first, or set LEDGERLM_BIN)"
if [[ ! -f "$data/meta.json" ]]; then
  [[ "$data" == data_out/kjv ]] || exp_fail "no prepared data in $data (ledgerlm prepare --out $data)"
  echo "exp_$exp_name: preparing the default corpus"
  LEDGERLM_BIN="$bin" scripts/prepare_default.sh
fi
if [[ -n "$publish" ]]; then
  [[ "$(realpath -m "$publish")" != "$(realpath -m "$out")" ]] ||
    exp_fail "EXP_PUBLISH must not be EXP_OUT ($out)"
  [[ ! -e "$publish/runs" || -f "$publish/manifest.tsv" ]] ||
    exp_fail "$publish has a runs/ but no manifest.tsv: not an experiment's published report (choose another EXP_PUBLISH)"
fi
rm -rf "$out/runs"
mkdir -p "$out/runs"
manifest="$out/manifest.tsv"
printf 'name\tpart\tlabel\tseed\tworld\tmicro\taccum\toptim\tlr\tstatus\n' >"$manifest"
printf 'key\tvalue\n' >"$out/params.tsv"
exp_start=$(date +%s)
exp_load_start=$(cut -d' ' -f1 /proc/loadavg)

# exp_run NAME PART LABEL SEED WORLD MICRO ACCUM OPTIM LR [FLAGS...]: one training, recorded in
# the manifest (the report reads it), its output in runs/NAME.log. WORLD > 1 runs under mpirun
# with one thread per rank (more ranks than cores: oversubscribed, right for curves, not speed).
# A failed run ends the experiment, except with EXP_MAY_DIVERGE=1 a run that stopped on a
# non-finite loss or gradient (an LR too high): it is recorded with status "diverged".
exp_run() {
  local name=$1 part=$2 label=$3 seed=$4 world=$5 micro=$6 accum=$7 optim=$8 lr=$9
  shift 9
  local args=(train --data.dir "$data" --train.out_dir "$out/runs" --train.name "$name"
    --train.seed "$seed" --train.micro_batch "$micro" --train.accum "$accum"
    --optim.name "$optim" --optim.lr "$lr" "$@")
  local log="$out/runs/$name.log" status=0
  echo "exp_$exp_name: $name ($label, seed $seed, $world x $micro x $accum, $optim lr $lr)"
  if ((world == 1)); then
    "$bin" "${args[@]}" --train.threads "$threads" >"$log" 2>&1 || status=$?
  else
    mpirun --allow-run-as-root --oversubscribe -np "$world" -x OMP_NUM_THREADS=1 \
      -x OMP_WAIT_POLICY=PASSIVE -x OPENBLAS_NUM_THREADS=1 \
      "$bin" "${args[@]}" --train.threads 1 >"$log" 2>&1 || status=$?
  fi
  local outcome=ok
  if ((status != 0)); then
    if [[ "${EXP_MAY_DIVERGE:-0}" == 1 ]] && grep -q "ledgerlm: error: non-finite" "$log"; then
      outcome=diverged
      echo "exp_$exp_name: $name diverged: $(grep -m1 'ledgerlm: error' "$log")"
    else
      tail -5 "$log" >&2
      exp_fail "run $name failed (exit $status); its output: $log"
    fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$part" "$label" "$seed" "$world" \
    "$micro" "$accum" "$optim" "$lr" "$outcome" >>"$manifest"
}

# exp_param KEY VALUE: a parameter of the experiment the report states (params.tsv).
exp_param() {
  printf '%s\t%s\n' "$1" "$2" >>"$out/params.tsv"
}

# exp_summary NAME FIELD: a number from a finished run's summary.json.
exp_summary() {
  "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$out/runs/$1/summary.json" "$2"
}

# exp_report COMMAND_TEXT: writes REPORT.md and the PNGs (scripts/exp/exp_report.py), then publishes.
exp_report() {
  "$py" scripts/exp/exp_report.py "$exp_name" --out "$out" --size "$size" --command "$1" \
    --seconds $(($(date +%s) - exp_start)) --load "$exp_load_start $(cut -d' ' -f1 /proc/loadavg)" \
    --threads "$threads"
  if [[ -n "$publish" ]]; then
    rm -rf "$publish/runs"
    rm -f "$publish"/*.png
    mkdir -p "$publish/runs"
    cp "$out/REPORT.md" "$out"/*.png "$out/manifest.tsv" "$out/params.tsv" "$publish/"
    local run
    for run in "$out"/runs/*/; do
      run=$(basename "$run")
      mkdir -p "$publish/runs/$run"
      for f in summary.json config.toml; do
        [[ ! -f "$out/runs/$run/$f" ]] || cp "$out/runs/$run/$f" "$publish/runs/$run/"
      done
      [[ ! -f "$out/runs/$run/metrics.jsonl" ]] ||
        gzip -9 -n -c "$out/runs/$run/metrics.jsonl" >"$publish/runs/$run/metrics.jsonl.gz"
    done
    echo "exp_$exp_name: published to $publish"
  fi
  echo "exp_$exp_name: wrote $out/REPORT.md"
}
