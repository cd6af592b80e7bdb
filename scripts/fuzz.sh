#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz: clang, libFuzzer + AddressSanitizer + UBSan, in
# build-fuzz/) and runs each on its committed seed corpus of valid inputs. New inputs go to a
# temporary directory: the committed corpus is never changed. Each target prints how many of its
# inputs reached the accept path; a target that accepted none fails the run (it would be testing
# only its first rejection), as does any crash, hang, leak or sanitizer report.
#   scripts/fuzz.sh          CI: every target with -runs=$LEDGERLM_FUZZ_RUNS (default 3000) and
#                            -seed=$LEDGERLM_FUZZ_SEED (default 1): a few seconds each
#   scripts/fuzz.sh long N   N executions per target (report: executions, crashes, time)
#   scripts/fuzz.sh build    only builds the targets (scripts/test.sh builds them in the
#                            background while the sanitizer tests run)
#   LEDGERLM_FUZZ_TARGETS    the targets to run (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-ci}
runs=${LEDGERLM_FUZZ_RUNS:-3000}
[ "$mode" = long ] && runs=${2:-1000000}
seed=${LEDGERLM_FUZZ_SEED:-1}
targets=${LEDGERLM_FUZZ_TARGETS:-"safetensors checkpoint config data"}

command -v clang++ >/dev/null || { echo "fuzz: clang++ missing (scripts/setup.sh installs it)"; exit 1; }
# ccache with scripts/setup.sh's settings (LEDGERLM_CCACHE_DIR, LEDGERLM_CCACHE=off).
launcher=(-UCMAKE_CXX_COMPILER_LAUNCHER)
if [ "${LEDGERLM_CCACHE:-on}" != off ] && command -v ccache >/dev/null 2>&1; then
  ccache_dir=${LEDGERLM_CCACHE_DIR:-${CCACHE_DIR:-$HOME/.cache/ccache}}
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/env;CCACHE_DIR=$ccache_dir;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;CCACHE_MAXSIZE=${LEDGERLM_CCACHE_SIZE:-8G};$(command -v ccache)")
fi
# The build's output is kept and shown only when it fails: a silent exit here would read as a
# fuzz failure with no cause.
build_log=$(mktemp)
if ! { cmake -S . -B build-fuzz -G Ninja -DLEDGERLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" && cmake --build build-fuzz -j "$(nproc)"; } >"$build_log" 2>&1; then
  echo "fuzz: building the fuzz targets failed; last lines of the build:"
  grep -v '^\[' "$build_log" | tail -40
  exit 1
fi
rm -f "$build_log"
[ "$mode" = build ] && exit 0

status=0
for t in $targets; do
  work=$(mktemp -d)
  start=$(date +%s)
  set +e
  # -timeout: an input running longer than 10 s is a hang; -rss_limit_mb: 2 GB is a leak or a
  # runaway allocation. ASAN_OPTIONS turn on leak checks at exit of every input run.
  ASAN_OPTIONS=detect_leaks=1 build-fuzz/tests/fuzz/fuzz_"$t" -runs="$runs" -seed="$seed" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" \
    -dict=tests/fuzz/fuzz.dict "$work" tests/fuzz/corpus/"$t" >"$work/log" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  counts=$(grep "^fuzz_$t: " "$work/log" | tail -1 || true)
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$work/log" | grep -o "[0-9]*$" || echo "?")
  accepted=$(echo "$counts" | sed -n 's/.* \([0-9]*\) accepted$/\1/p')
  if [ $rc -ne 0 ] || [ -z "$accepted" ] || [ "$accepted" -eq 0 ]; then
    echo "fuzz: $t FAILED (exit $rc, ${counts:-no counters}); last lines of its log:"
    tail -40 "$work/log"
    ls "$work" | grep -E "^(crash|leak|timeout|oom)-" | sed "s|^|fuzz: artifact $work/|" || true
    status=1
  else
    echo "fuzz: $t ok: $execs executions in ${secs}s, 0 crashes; $counts"
    rm -rf "$work"
  fi
done
exit $status
