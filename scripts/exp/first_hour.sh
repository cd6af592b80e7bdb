#!/usr/bin/env bash
# A new user's first hour, measured (results/first_hour/NOTE.md):
#   scripts/exp/first_hour.sh floor
#       the compile floor of the trainer alone: the ledgerlm target of a CPU Release build in a
#       fresh build directory, 2 jobs, no compiler cache; prints the wall and CPU seconds and the
#       15 translation units that take longest (CPU seconds each, from /usr/bin/time).
#   scripts/exp/first_hour.sh chroot SOURCE [ROOT]     (as root; apt-get install debootstrap)
#       seconds from `git clone SOURCE` to the demo's first training step on a Debian 12 whose apt
#       state is fresh: a debootstrap --variant=minbase chroot in ROOT (default
#       /var/tmp/ledgerlm-fresh), with git and ca-certificates installed beforehand (the user's own
#       tools, not timed) and then the package lists and the archive cache removed, so that
#       scripts/demo.sh's apt-get update and every download are inside the timing. SOURCE is a
#       URL, or a local clone, not a worktree (bind-mounted read-only and cloned from there: the
#       network part of the clone is then left out; it is a few MB). ROOT must not exist. Runs on
#       cores 0 and 1 only (taskset), like a 2-core machine. Writes ROOT.log with each line of the
#       clone and the demo prefixed by the seconds since the clone began.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"

floor() {
  local build
  build=$(mktemp -d /tmp/ledgerlm-floor.XXXXXX)
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEDGERLM_CUDA=OFF \
    -DLEDGERLM_TESTS=OFF "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/time;-a;-o;$build/tu_times.txt;-f;%U %S %e %C" \
    >/dev/null
  echo "floor: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "floor: ninja -j2 ledgerlm: %e s wall, %U s user, %S s sys" \
    taskset -c 0,1 ninja -C "$build" -j2 ledgerlm >"$build/ninja.log"
  echo "floor: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  awk '{n++; u += $1; s += $2} END {printf "floor: %d translation units, %.0f s user + %.0f s sys\n", n, u, s}' \
    "$build/tu_times.txt"
  echo "floor: the 15 longest (user s, sys s, wall s, file):"
  awk '{f = $NF; for (i = 4; i <= NF; i++) if ($i == "-c") f = $(i + 1); printf "%7.1f %5.1f %6.1f  %s\n", $1, $2, $3, f}' \
    "$build/tu_times.txt" | sort -rn | head -15
  echo "floor: build directory $build"
}

fresh_chroot() {
  local source=$1 root=${2:-/var/tmp/ledgerlm-fresh}
  [ "$(id -u)" -eq 0 ] || { echo "first_hour: chroot needs root" >&2; exit 1; }
  # A root left by an earlier measurement holds the demo's packages: never reused.
  [ ! -e "$root" ] || { echo "first_hour: $root exists; remove it (a fresh root is the point)" >&2; exit 1; }
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
  for d in proc sys dev dev/pts; do mountpoint -q "$root/$d" || mount --bind "/$d" "$root/$d"; done
  # ROOT expanded now: the trap runs after this function's locals are gone.
  trap "for d in src dev/pts dev sys proc; do umount \"$root/\$d\" 2>/dev/null || true; done" EXIT
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends \
    git ca-certificates >/dev/null
  # Fresh apt state: no package lists, no downloaded archives, nothing of ledgerlm's.
  chroot "$root" bash -c 'apt-get clean && rm -rf /var/lib/apt/lists/* /root/ledgerlm /root/.cache'
  local url=$source
  if [ -d "$source/.git" ]; then
    mkdir -p "$root/src"
    mount --bind -o ro "$source" "$root/src"
    url=/src
  fi
  echo "first_hour: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  taskset -c 0,1 chroot "$root" /bin/bash -c '
    cd /root
    t0=${EPOCHREALTIME/./}
    { git clone -q "'"$url"'" ledgerlm && cd ledgerlm && scripts/demo.sh --train.log_interval 1; } 2>&1 |
      while IFS= read -r line; do
        tenths=$(((${EPOCHREALTIME/./} - t0) / 100000))
        printf "%5d.%d %s\n" $((tenths / 10)) $((tenths % 10)) "$line"
      done' | tee "$root.log"
  echo "first_hour: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "first_hour: clone to the first training step: $(grep -m1 -E '^ *[0-9]+\.[0-9] step 1/' "$root.log" | awk '{print $1}') s"
}

case "${1:-}" in
  floor) floor ;;
  chroot) shift; fresh_chroot "$@" ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
