#!/usr/bin/env bash
# The test command, in stages, the fast ones first so that a failure shows early:
#   build      setup (install + Release build, CUDA compiled when nvcc is found)
#   quick      the ctest tests labelled unit and backend (tests/unit, tests/backend)
#   rest       every other ctest test: e2e, dist, guard, reference, slow, cuda, slurm labels
#   package    scripts/package_check.sh: the Debian package of a CPU build, installed with apt, run, removed
#   san-build  the sanitizer build (ASan + UBSan, -Og, CUDA off) in build-sanitize/. It starts
#              in the background, at the lowest CPU priority, as soon as the Release build is
#              done, and compiles on what the quick and rest stages leave idle (their tests wait
#              on processes, mpirun, sleeps and the disk); this stage waits for what is left of it
#              (build-sanitize/san-build.log; its own wall time is printed)
#   san-tests  the CPU tests again under the sanitizers (-LE "reference|slow|guard|cuda|slurm|script":
#              see tests/README.md for what the sanitizer pass covers and why)
#   fuzz       scripts/fuzz.sh: every libFuzzer target for a fixed -runs and -seed. Its build
#              (clang, build-fuzz/) starts in the background at the lowest CPU priority when the
#              sanitizer build is done, on what the sanitizer tests leave idle; this stage waits
#              for it (build-fuzz/fuzz-build.log), then runs the targets
# Each stage prints its wall time and the load average at its end, each ctest stage its 10
# slowest tests (ctest's JUnit file, junit-<stage>.xml in the build directory), and the run ends
# with a table of all stages. The first failing stage ends the run (exit status non-zero).
# Every build goes through ccache when it is installed (scripts/setup.sh); the table shows each
# stage's cache hits (this run's stats log: build/ccache-stats.log).
#   LEDGERLM_SKIP_SANITIZE=1  skip the sanitizer stages
#   LEDGERLM_SKIP_FUZZ=1      skip the fuzz stage
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  export LEDGERLM_CUDA=on   # prove the CUDA backend compiles (it runs only where a GPU is)
  export LEDGERLM_CUDNN_FRONTEND=required  # and its cuDNN attention with it
  # One architecture proves it: the CUDA sources have no architecture-dependent branch, so a
  # second one (the users' default builds sm_80 and sm_90) would compile the same code again
  # (about 90 s of a cold build on 2 cores). sm_90: the H100/H200 the GPU check runs on.
  export LEDGERLM_CUDA_ARCHITECTURES=${LEDGERLM_CUDA_ARCHITECTURES:-90}
fi
export OMP_WAIT_POLICY=PASSIVE
mkdir -p build
export CCACHE_STATSLOG=$root/build/ccache-stats.log
rm -f "$CCACHE_STATSLOG"
# ccache_counts: "HITS MISSES" of this run so far.
ccache_counts() {
  awk '/^(direct|preprocessed)_cache_hit$/ {h++} /^cache_miss$/ {m++} END {print h + 0, m + 0}' \
    "$CCACHE_STATSLOG" 2>/dev/null || echo "0 0"
}

start=$(date +%s)
table=()     # one line per finished stage
current=""   # the stage running now
san_pid=""   # the background sanitizer build, while it runs
fuzz_pid=""  # the background fuzz build, while it runs
summary() {
  local rc=$?
  if [ -n "$san_pid" ]; then kill -- -"$san_pid" 2>/dev/null || kill "$san_pid" 2>/dev/null || true; fi
  if [ -n "$fuzz_pid" ]; then kill -- -"$fuzz_pid" 2>/dev/null || kill "$fuzz_pid" 2>/dev/null || true; fi
  [ -n "$current" ] && table+=("$(printf '%-10s %6s s  FAILED (exit %s)' "$current" $(($(date +%s) - stage_start)) "$rc")")
  echo
  echo "test: stages (wall seconds, load average at the end)"
  for line in "${table[@]}"; do echo "test:   $line"; done
  echo "test: total $(($(date +%s) - start)) s$([ "$rc" -ne 0 ] && echo ", FAILED")"
}
trap summary EXIT
trap 'exit 130' INT   # the table then shows the stage that was stopped, with this status
trap 'exit 143' TERM

# stage NAME COMMAND...: runs COMMAND as one stage.
stage() {
  current=$1
  shift
  echo "test: stage $current"
  stage_start=$(date +%s)
  local h0 m0 h1 m1 cache=""
  read -r h0 m0 < <(ccache_counts)
  "$@"
  local secs=$(($(date +%s) - stage_start)) load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  read -r h1 m1 < <(ccache_counts)
  (((h1 - h0) + (m1 - m0) > 0)) && cache="  ccache hits $((h1 - h0))/$((h1 - h0 + m1 - m0))"
  echo "test: stage $current done in $secs s (load average $load)"
  table+=("$(printf '%-10s %6s s  load %s%s' "$current" "$secs" "$load" "$cache")")
  current=""
}

# The 10 slowest tests of a JUnit file written by ctest.
slowest() {
  /usr/bin/python3 - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
cases = [(float(c.get("time") or 0), c.get("name")) for c in ET.parse(sys.argv[1]).iter("testcase")]
print(f"test: the 10 slowest of {len(cases)} tests ({sum(t for t, _ in cases):.0f} s in all):")
for t, name in sorted(cases, reverse=True)[:10]:
    print(f"test:   {t:7.1f} s  {name}")
EOF
}

# ctest_stage DIR NAME CTEST_ARGS...: ctest in DIR; the JUnit file is DIR/junit-NAME.xml.
ctest_stage() {
  local dir=$1 name=$2 rc=0
  shift 2
  (cd "$dir" && ctest --output-on-failure -j 2 --output-junit "junit-$name.xml" "$@") || rc=$?
  slowest "$dir/junit-$name.xml" 2>/dev/null || echo "test: no readable $dir/junit-$name.xml"
  return $rc
}

# san_build_wait: waits for the background sanitizer build; its log when it failed.
san_build_wait() {
  local rc=0
  wait "$san_pid" || rc=$?
  san_pid=""
  local hm
  hm=$(CCACHE_STATSLOG=build-sanitize/ccache-stats.log ccache_counts)
  echo "test: the sanitizer build took $(cat build-sanitize/san-build.secs 2>/dev/null || echo '?') s of wall time in all (ccache hits ${hm% *}/$((${hm% *} + ${hm#* })))"
  if [ "$rc" -ne 0 ]; then
    echo "test: the sanitizer build failed (exit $rc); its last lines:"
    grep -v '^\[' build-sanitize/san-build.log | tail -40
  fi
  return $rc
}

# fuzz_stage: waits for the background fuzz build (its log when it failed), then runs the targets
# (scripts/fuzz.sh finds them built).
fuzz_stage() {
  if [ -n "$fuzz_pid" ]; then
    local rc=0
    wait "$fuzz_pid" || rc=$?
    fuzz_pid=""
    local hm
    hm=$(CCACHE_STATSLOG=build-fuzz/ccache-stats.log ccache_counts)
    echo "test: the fuzz build ran in the background (ccache hits ${hm% *}/$((${hm% *} + ${hm#* })))"
    if [ "$rc" -ne 0 ]; then
      echo "test: the background fuzz build failed (exit $rc); its last lines:"
      tail -40 build-fuzz/fuzz-build.log
      return $rc
    fi
  fi
  scripts/fuzz.sh
}

stage build scripts/setup.sh
if [ "${LEDGERLM_SKIP_SANITIZE:-0}" != 1 ]; then
  # The sanitizer build in its own process group (set -m), so that the exit trap can end all of it.
  mkdir -p build-sanitize
  set -m
  (
    s0=$(date +%s)
    export CCACHE_STATSLOG=$root/build-sanitize/ccache-stats.log  # its own, not the stages'
    rm -f "$CCACHE_STATSLOG"
    env LEDGERLM_BUILD_DIR=build-sanitize LEDGERLM_SANITIZE=on LEDGERLM_CUDA=off \
      nice -n 19 scripts/setup.sh >build-sanitize/san-build.log 2>&1
    rc=$?
    echo $(($(date +%s) - s0)) >build-sanitize/san-build.secs
    exit $rc
  ) &
  san_pid=$!
  set +m
fi
# The quick tier first (labels unit and backend: tests/README.md), then everything else: together,
# every test.
stage quick ctest_stage build quick --timeout 600 -L '^(unit|backend)$'
stage rest ctest_stage build rest --timeout 600 -LE '^(unit|backend)$'
stage package scripts/package_check.sh
if [ "${LEDGERLM_SKIP_SANITIZE:-0}" != 1 ]; then
  stage san-build san_build_wait
  if [ "${LEDGERLM_SKIP_FUZZ:-0}" != 1 ]; then
    mkdir -p build-fuzz
    set -m
    rm -f build-fuzz/ccache-stats.log
    (CCACHE_STATSLOG=$root/build-fuzz/ccache-stats.log exec nice -n 19 scripts/fuzz.sh build \
      >build-fuzz/fuzz-build.log 2>&1) &
    fuzz_pid=$!
    set +m
  fi
  export ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
  # On an AVX-512 machine the Release pass ran the AVX-512 kernels; the sanitizer pass runs the
  # AVX2 ones, so that one CI run covers both paths an x86 user can get (an AVX2-only machine runs
  # AVX2 in both). The flags are the ones cpu_isa_supported() asks for.
  if awk '/^flags/ {f = $0 " "; exit} END {exit !(f ~ / avx512f / && f ~ / avx512bw / && f ~ / avx512vl / && f ~ / avx512dq / && f ~ / avx2 / && f ~ / fma / && f ~ / f16c /)}' /proc/cpuinfo; then
    export LEDGERLM_CPU_ISA=avx2
    echo "test: the sanitizer pass runs the AVX2 kernels (LEDGERLM_CPU_ISA=avx2); the Release pass ran AVX-512"
  fi
  stage san-tests ctest_stage build-sanitize san --timeout 900 -LE "reference|slow|guard|cuda|slurm|script"
  unset ASAN_OPTIONS LSAN_OPTIONS LEDGERLM_CPU_ISA
fi
if [ "${LEDGERLM_SKIP_FUZZ:-0}" != 1 ]; then
  stage fuzz fuzz_stage
fi
