#!/usr/bin/env bash
# The Debian package, end to end (scripts/test.sh's package stage): builds a CPU build's package
# with CPack in build-package/, installs it with apt, runs the installed ledgerlm from a directory
# outside the checkout (--help, a 20-step training run on a tiny corpus, sample, and a study
# report on a smoke study), then removes the package and checks that nothing of it is left.
#   LEDGERLM_PACKAGE_BUILD_DIR  the package's build directory (default: build-package)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build_dir=${LEDGERLM_PACKAGE_BUILD_DIR:-build-package}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# A CPU build: a CUDA build links the toolkit's libraries, which no Debian package holds.
LEDGERLM_SETUP=runtime LEDGERLM_CUDA=off LEDGERLM_BUILD_DIR="$build_dir" scripts/setup.sh
rm -f "$build_dir"/ledgerlm_*.deb
(cd "$build_dir" && cpack -G DEB >cpack.log) || { cat "$build_dir/cpack.log"; exit 1; }
deb=$(ls "$root/$build_dir"/ledgerlm_*.deb)
echo "package: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
echo "package: recommends $(dpkg-deb -f "$deb" Recommends)"

# An earlier copy (a run stopped half-way) would make apt keep it: the one just built is tested.
if dpkg-query -W -f='${Status}' ledgerlm 2>/dev/null | grep -q "install ok installed"; then
  $SUDO apt-get remove -y -qq ledgerlm >/dev/null
fi
$SUDO apt-get install -y -qq "$deb" >/dev/null
work=$(mktemp -d /tmp/ledgerlm-package.XXXXXX)
cleanup() {
  cd /
  rm -rf "$work"
  if dpkg-query -W -f='${Status}' ledgerlm 2>/dev/null | grep -q "install ok installed"; then
    $SUDO apt-get remove -y -qq ledgerlm >/dev/null
  fi
}
trap cleanup EXIT

cd "$work"
[ "$(command -v ledgerlm)" = /usr/bin/ledgerlm ] || { echo "package: ledgerlm is not /usr/bin/ledgerlm" >&2; exit 1; }
ledgerlm --help >/dev/null
# The OpenMP OpenBLAS through the installed binary's run path, not the default pthread build.
ldd /usr/bin/ledgerlm | grep -c "openblas-openmp/libopenblas.so.0" >/dev/null ||
  { echo "package: the installed ledgerlm does not load the OpenMP OpenBLAS:" >&2; ldd /usr/bin/ledgerlm >&2; exit 1; }
for i in $(seq 1 1200); do echo "in the beginning was the word, and the word was $((i % 31))."; done >corpus.txt
ledgerlm prepare --input corpus.txt --tokenizer bytes --out data/tiny >/dev/null
configs=/usr/share/ledgerlm/configs
ledgerlm train --config "$configs/tiny_test.toml" --data.dir data/tiny --train.out_dir runs \
  --train.name pkg --train.max_steps 20 --train.threads 2 >train.log
/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
sys.exit(not (s["status"] == "finished" and s["steps"] == 20))' runs/pkg/summary.json ||
  { cat train.log runs/pkg/summary.json; exit 1; }
ledgerlm sample --run runs/pkg --prompt "in the" --tokens 16 --seed 1 >/dev/null
cat >study.toml <<TOML
name = "package_smoke"
config = "$configs/tiny_test.toml"
baseline = "adamw_lr0.003"
[base]
"data.dir" = "$work/data/tiny"
"train.max_steps" = 20
"train.eval_interval" = 10
"optim.warmup_steps" = 2
[axes]
"optim.name" = ["adamw", "sgd"]
"train.seed" = [1, 2]
"optim.lr" = [3e-3, 1e-2]
[grid.sgd]
"optim.lr" = [0.1, 0.3]
TOML
ledgerlm study plan study.toml --out study >/dev/null
ledgerlm study run study -j 2 >study_run.log
# --allow-dirty: a package built from a checkout with uncommitted changes trains runs that say so.
ledgerlm study report --allow-dirty study >study_report.log || { cat study_report.log; exit 1; }
[ -s study/REPORT.md ] || { echo "package: no study/REPORT.md" >&2; exit 1; }
echo "package: the installed ledgerlm ran --help, train (20 steps), sample and study report in $work"

cd /
$SUDO apt-get remove -y -qq ledgerlm >/dev/null
left=$(ls -d /usr/bin/ledgerlm /usr/share/ledgerlm /usr/share/doc/ledgerlm 2>/dev/null || true)
[ -z "$left" ] || { echo "package: left after apt-get remove: $left" >&2; exit 1; }
echo "package: removed cleanly"
