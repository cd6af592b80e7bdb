#!/usr/bin/env bash
# The test command: setup (install + build, CUDA compiled when nvcc is found) and every test.
# Then the sanitizer build (ASan + UBSan, CUDA off) runs the tests again without the labels
# reference, slow and guard (tests/README.md: the labels come from the tests' folders), and the
# fuzz stage (scripts/fuzz.sh: every libFuzzer target for a fixed -runs and -seed) runs last.
#   LEDGERLM_SKIP_SANITIZE=1  skip the sanitizer pass
#   LEDGERLM_SKIP_FUZZ=1      skip the fuzz stage
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  export LEDGERLM_CUDA=on   # prove the CUDA backend compiles (it runs only where a GPU is)
fi
start=$(date +%s)
scripts/setup.sh
echo "test: build done in $(($(date +%s) - start)) s"
export OMP_WAIT_POLICY=PASSIVE
(cd build && ctest --output-on-failure -j 2 --timeout 600)
if [ "${LEDGERLM_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "test: sanitizer build (ASan + UBSan, CPU only)"
  LEDGERLM_BUILD_DIR=build-sanitize LEDGERLM_SANITIZE=on LEDGERLM_CUDA=off scripts/setup.sh
  (cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp ctest --output-on-failure -j 2 --timeout 900 -LE "reference|slow|guard")
fi
if [ "${LEDGERLM_SKIP_FUZZ:-0}" != 1 ]; then
  fuzz_start=$(date +%s)
  echo "test: fuzz stage (libFuzzer + ASan + UBSan, fixed -runs and -seed)"
  scripts/fuzz.sh
  echo "test: fuzz stage done in $(($(date +%s) - fuzz_start)) s"
fi
echo "test: all done in $(($(date +%s) - start)) s"
