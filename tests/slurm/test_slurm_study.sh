#!/usr/bin/env bash
# Studies on a real Slurm: munged, slurmctld and slurmd started here on localhost (configuration
# slurm.conf.in, a munge key made for the run), torn down at the end. A daemon that does not come
# up is a failure, not a skip. Then, each against the same study run locally (`study run -j 1`),
# bit for bit (every step's loss and the final weights):
#   smoke     2 optimizers x 2 seeds submitted with `study run --slurm`
#   signal    a run sent `scancel --batch --signal=USR1` mid-run: stops at a checkpoint, exits 75,
#             requeues itself and resumes
#   limit     a run longer than its one-minute time limit (--time 1 --stop-ahead 59): Slurm's own
#             SIGUSR1 ahead of the limit stops it, it requeues and finishes (requeued tasks wait
#             Slurm's fixed two minutes before they may start: the test lets them start at once)
#   zero2     a one-rank run spread over 2 ranks at ZeRO-2 (--ranks-per-run 2), launched by Slurm
#             (mpirun inside the allocation), equals the same under a plain mpirun (study run -j 1
#             --ranks-per-run 2)
# The configuration's MaxArraySize is 3, so the smoke study's 4 runs go as two arrays; after each
# submission's arrays its next job evaluates the runs (compared with -j 1's evaluations).
# usage: tests/slurm/test_slurm_study.sh BUILD_DIR   (as root; scripts/setup.sh installs
# slurm-wlm and munge). LEDGERLM_TEST_KEEP_TMP=1 keeps the scratch directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
bin=$(cd "${1:?usage: test_slurm_study.sh BUILD_DIR}" && pwd)/ledgerlm
t0=$(date +%s)
say() { echo "slurm test: $*"; }
fail() {
  echo "slurm test: FAILED: $*" >&2
  exit 1
}
for c in munged mungekey munge slurmctld slurmd sbatch squeue scontrol scancel sinfo mpirun; do
  command -v "$c" >/dev/null || fail "$c not found (scripts/setup.sh installs slurm-wlm and munge)"
done
[ -x "$bin" ] || fail "no ledgerlm binary at $bin"
[ "$(id -u)" -eq 0 ] || fail "run as root (slurmd starts jobs as their users)"

work=$(mktemp -d /tmp/ledgerlm_slurm_XXXXXX)
chmod 755 "$work"
daemons=()  # pids, in start order
cleanup() {
  local rc=$?
  if [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ]; then
    # Jobs first: their steps outlive slurmd otherwise.
    scancel --full --quiet --user=root 2>/dev/null || true
    for _ in $(seq 20); do
      [ -z "$(squeue -h --me 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do kill "${daemons[i]}" 2>/dev/null || true; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    for f in slurmctld.log slurmd.log munge/log; do
      [ -e "$work/$f" ] && { echo "--- $f (last lines)"; tail -15 "$work/$f"; }
    done
  fi
  if [ "${LEDGERLM_TEST_KEEP_TMP:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
  say "$([ "$rc" -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - t0)) s"
}
trap cleanup EXIT

# munge: a key of our own, the socket in a directory every user may enter (munged checks).
mkdir -p "$work/key" "$work/munge" "$work/state" "$work/spool"
chmod 700 "$work/key"
chmod 755 "$work/munge"
mungekey --create --keyfile="$work/key/munge.key" --bits=1024
munged --foreground --key-file="$work/key/munge.key" --socket="$work/munge/socket" \
  --pid-file="$work/munge/pid" --log-file="$work/munge/log" --seed-file="$work/munge/seed" \
  >"$work/munge/out" 2>&1 &
daemons+=($!)
for _ in $(seq 50); do [ -S "$work/munge/socket" ] && break; sleep 0.2; done
echo check | munge --socket="$work/munge/socket" | unmunge --socket="$work/munge/socket" >/dev/null ||
  fail "munged did not start: $(tail -3 "$work/munge/out")"

# Ports of our own, so that another Slurm on the machine (or another run of this test) is left alone.
port=$((20000 + ($$ % 5000) * 2))
sed -e "s|@DIR@|$work|g" -e "s|@HOST@|$(hostname -s)|g" -e "s|@CPUS@|$(nproc)|g" \
  -e "s|@CTLD_PORT@|$port|g" -e "s|@D_PORT@|$((port + 1))|g" "$here/slurm.conf.in" >"$work/slurm.conf"
export SLURM_CONF=$work/slurm.conf
slurmctld -D -c -i >"$work/slurmctld.out" 2>&1 &
daemons+=($!)
for i in $(seq 50); do
  scontrol ping 2>/dev/null | grep -q "is UP" && break
  kill -0 "${daemons[1]}" 2>/dev/null || fail "slurmctld exited: $(tail -3 "$work/slurmctld.out")"
  [ "$i" -eq 50 ] && fail "slurmctld did not answer within 10 s"
  sleep 0.2
done
slurmd -D >"$work/slurmd.out" 2>&1 &
daemons+=($!)
for i in $(seq 100); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
  kill -0 "${daemons[2]}" 2>/dev/null || fail "slurmd exited: $(tail -3 "$work/slurmd.out")"
  [ "$i" -eq 100 ] && fail "the node is not idle 20 s after slurmd started: $(sinfo 2>&1 | tail -1)"
  sleep 0.2
done
say "munged, slurmctld and slurmd up in $(($(date +%s) - t0)) s ($(nproc) CPUs)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMP_WAIT_POLICY=passive

# The data: a small byte-level corpus.
for i in $(seq 0 900); do echo "in the beginning was the word, and the word was $((i % 31))."; done \
  >"$work/corpus.txt"
"$bin" prepare --input "$work/corpus.txt" --out "$work/data" --tokenizer bytes >/dev/null

# study NAME STEPS AXES: a study file over the tiny config, planned into $work/NAME-local and
# $work/NAME-slurm.
study() {
  local name=$1 steps=$2 axes=$3
  printf '%s\n' "name = \"$name\"" "config = \"$src/configs/tiny_test.toml\"" "[base]" \
    "\"data.dir\" = \"$work/data\"" "\"train.max_steps\" = $steps" "\"train.eval_interval\" = 10" \
    "\"optim.warmup_steps\" = 2" "[axes]" "$axes" >"$work/$name.toml"
  for where in local slurm; do
    "$bin" study plan "$work/$name.toml" --out "$work/$name-$where" >/dev/null
  done
}

# job_of DIR: the last Slurm job array recorded in DIR's manifest (not the job after it).
job_of() {
  /usr/bin/python3 -c 'import json,sys; print([j for j in json.load(open(sys.argv[1]))["slurm"]["jobs"]
                                               if j["runs"]][-1]["job"])' "$1/manifest.json"
}

# wait_finished DIR SECONDS: until every run of DIR is finished and the queue is empty (the job after
# the arrays has ended too). A requeued task waits Slurm's fixed two minutes (Reason=BeginTime)
# before it may start again: it is let start at once.
wait_finished() {
  local dir=$1 limit=$2 start line
  start=$(date +%s)
  while true; do
    line=$("$bin" study status "$dir" | tail -1)
    [[ "$line" =~ :\ ([0-9]+)\ run\(s\):\ ([0-9]+)\ finished$ ]] &&
      [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ -z "$(squeue -h --me)" ] && return 0
    [[ "$line" == *failed* ]] && { "$bin" study status "$dir"; fail "a run failed in $dir"; }
    squeue -h -r --me -o '%i %r' | awk '$2 == "BeginTime" {print $1}' |
      while read -r id; do scontrol update jobid="$id" starttime=now >/dev/null 2>&1 || true; done
    (($(date +%s) - start > limit)) && {
      "$bin" study status "$dir"
      squeue
      fail "$dir: not finished within $limit s"
    }
    sleep 1
  done
}

# same_runs A B: every run of A's manifest has the same loss at every step and the same final
# weights in B.
same_runs() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = sys.argv[1:3]
runs = [r["name"] for r in json.load(open(f"{a}/manifest.json"))["runs"]]
def losses(d, n):
    out = {}
    for line in open(f"{d}/runs/{n}/metrics.jsonl"):
        r = json.loads(line)
        if "loss" in r and "step" in r:
            assert r["step"] not in out, f"{d}/{n}: step {r['step']} twice"
            out[r["step"]] = r["loss"].hex() if isinstance(r["loss"], float) else r["loss"]
    return out
for n in runs:
    la, lb = losses(a, n), losses(b, n)
    if la != lb:
        bad = next(s for s in sorted(set(la) | set(lb)) if la.get(s) != lb.get(s))
        sys.exit(f"{n}: losses differ from step {bad}: {la.get(bad)} vs {lb.get(bad)}")
    if open(f"{a}/runs/{n}/model.safetensors", "rb").read() != \
            open(f"{b}/runs/{n}/model.safetensors", "rb").read():
        sys.exit(f"{n}: final weights differ")
print(f"{len(runs)} run(s) equal bit for bit")
EOF
}

cpus=$(nproc)

# smoke: the study through Slurm, one run at a time with every CPU (as -j 1 runs them locally).
s=$(date +%s)
study smoke 30 $'"optim.name" = ["adamw", "sgd"]\n"train.seed" = [1, 2]\n"optim.lr" = 3e-3'
"$bin" study run "$work/smoke-local" -j 1 >/dev/null
"$bin" study run "$work/smoke-slurm" --slurm --cpus-per-run "$cpus" --max-parallel 1
wait_finished "$work/smoke-slurm" 180
same_runs "$work/smoke-local" "$work/smoke-slurm" || fail "smoke: --slurm differs from -j 1"
[ "$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["slurm"]["jobs"]))' \
  "$work/smoke-slurm/manifest.json")" = 3 ] || fail "smoke: not two arrays (MaxArraySize 3) and a next job"
for r in "$work"/smoke-local/runs/*/study_eval.json; do
  cmp -s "$r" "$work/smoke-slurm/runs/$(basename "$(dirname "$r")")/study_eval.json" ||
    fail "smoke: the next job's evaluation of $(dirname "$r") differs from -j 1's"
done
again=$("$bin" study run "$work/smoke-slurm" --slurm)
[[ "$again" == *"nothing to submit (4 finished"* ]] || fail "smoke: a second submission: $again"
say "smoke: 4 runs through Slurm equal -j 1 ($(($(date +%s) - s)) s)"

# signal: scancel --batch --signal=USR1 while the run trains.
s=$(date +%s)
study signal 600 $'"train.seed" = [1, 2]\n"optim.lr" = 3e-3'
"$bin" study run "$work/signal-local" -j 1 >/dev/null
"$bin" study run "$work/signal-slurm" --slurm --cpus-per-run "$cpus" --max-parallel 1
job=$(job_of "$work/signal-slurm")
run=$work/signal-slurm/runs/seed1
for i in $(seq 300); do
  n=$(grep -c '"loss"' "$run/metrics.jsonl" 2>/dev/null || true)
  [ "${n:-0}" -ge 3 ] && break
  [ "$i" -eq 300 ] && fail "signal: the run did not start within 60 s"
  sleep 0.2
done
scancel --batch --signal=USR1 "${job}_0"
wait_finished "$work/signal-slurm" 240
grep -q "stopped by STOP file" "$run/slurm.log" || fail "signal: no stop in $run/slurm.log"
grep -q "resumed from" "$run/slurm.log" || fail "signal: no resume in $run/slurm.log"
grep -q "== exit 75" "$run/slurm.log" || fail "signal: the stopped run did not exit 75"
same_runs "$work/signal-local" "$work/signal-slurm" || fail "signal: the requeued run differs"
say "signal: stopped by scancel --signal=USR1, requeued, resumed: equal ($(($(date +%s) - s)) s)"

# limit: a one-minute time limit; Slurm's SIGUSR1 comes 59 s ahead of it, that is at slurmctld's
# first look at time limits after the first second (it looks every 30 s): 1 to 31 s after the
# start. The run trains for 35 s (train.max_seconds counts training time over every resume),
# whatever the machine's pace, so it stops at least once. One CPU: the run is compared with
# nothing, and the test's other half-minute of waiting leaves the other CPUs to ctest's other tests.
s=$(date +%s)
study limit 100000000 $'"optim.lr" = 3e-3\n"train.eval_interval" = 1000\n"train.max_seconds" = 35'
"$bin" study run "$work/limit-slurm" --slurm --cpus-per-run 1 --time 1 --stop-ahead 59
wait_finished "$work/limit-slurm" 400
run=$(ls -d "$work"/limit-slurm/runs/*/)
grep -q "SIGUSR1" "$run/slurm.log" || fail "limit: no SIGUSR1 from Slurm in $run/slurm.log"
grep -q "resumed from" "$run/slurm.log" || fail "limit: the run never resumed"
say "limit: 35 s of training in $(grep -c '^== slurm job' "$run/slurm.log") task starts under a one-minute limit, finished ($(($(date +%s) - s)) s)"

# zero2: a one-rank plan (world 1 x micro-batch 8) spread over 2 ranks of 4 at ZeRO-2, launched by
# Slurm (--ntasks=2, mpirun inside) and by `study run` (mpirun -np 2), the same threads per rank.
s=$(date +%s)
study zero2 30 $'"dist.zero" = 2\n"train.seed" = 1\n"optim.lr" = 3e-3'
"$bin" study run "$work/zero2-local" -j 1 --ranks-per-run 2 >/dev/null
"$bin" study run "$work/zero2-slurm" --slurm --ranks-per-run 2 \
  --cpus-per-run $((cpus / 2 > 0 ? cpus / 2 : 1))
wait_finished "$work/zero2-slurm" 180
same_runs "$work/zero2-local" "$work/zero2-slurm" || fail "zero2: Slurm differs from mpirun"
grep -q "world 2 x micro-batch 4" "$(ls -d "$work"/zero2-slurm/runs/*/)slurm.log" ||
  fail "zero2: the run did not train on 2 ranks of 4"
say "zero2: a 2-rank ZeRO-2 run under Slurm equals mpirun ($(($(date +%s) - s)) s)"
