# Sourced by the benchmark and experiment scripts (scripts/bench, scripts/exp, scripts/gpu): the
# start they share, so that each refuses a missing binary, tool or corpus the same way, in one line
# "NAME: error: ..." on stderr.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../lib/script_start.sh"
#   script_start bench_foo             # cd to the repository root; bin = LEDGERLM_BIN or build/ledgerlm
#   need_exec "$bin" "build first, or set LEDGERLM_BIN"
#   need_default_corpus                # data_out/kjv prepared (scripts/prepare_default.sh) if missing

# script_start NAME [DEFAULT_BIN]: sets `script` (the name errors carry), `repo_root` (and goes
# there: every script's paths are relative to it) and `bin` (LEDGERLM_BIN, else DEFAULT_BIN, else
# build/ledgerlm).
script_start() {
  script="$1"
  repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  cd "$repo_root"
  bin="${LEDGERLM_BIN:-${2:-build/ledgerlm}}"
}

# die MESSAGE [STATUS]: one error line naming the script; exits with STATUS (default 1).
die() {
  echo "$script: error: $1" >&2
  exit "${2:-1}"
}

# need_exec PATH HINT: PATH is an executable file, else an error saying how to get one.
need_exec() {
  [[ -x "$1" ]] || die "$1 not found or not executable ($2)"
}

# need_command NAME HINT: NAME is on PATH.
need_command() {
  command -v "$1" >/dev/null || die "$1 not found ($2)"
}

# need_file PATH HINT: PATH is a regular file.
need_file() {
  [[ -f "$1" ]] || die "$1 not found ($2)"
}

# need_python_module PYTHON MODULE HINT: PYTHON can import MODULE.
need_python_module() {
  "$1" -c "import $2" 2>/dev/null || die "$1 has no $2 package ($3)"
}

# need_default_corpus: the default corpus in data_out/kjv, prepared with `bin` when it is not there.
need_default_corpus() {
  if [[ ! -f data_out/kjv/meta.json ]]; then
    echo "$script: preparing the default corpus"
    LEDGERLM_BIN="$bin" scripts/prepare_default.sh
  fi
}

# parse_options HELP NAME... -- ARGS...: the command-line options of a script that takes
# `--NAME VALUE` pairs and plain arguments. For each NAME listed, `--NAME VALUE` sets the variable
# NAME (dashes read as underscores); -h/--help prints lines HELP (a sed range, "2,18") of the
# script and exits 0; any other argument is appended to the array `positional`.
parse_options() {
  local help="$1" names=() name
  shift
  while [[ $# -gt 0 && "$1" != -- ]]; do names+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift  # the --
  positional=()
  while [[ $# -gt 0 ]]; do
    if [[ "$1" == -h || "$1" == --help ]]; then
      sed -n "${help}p" "$0"
      exit 0
    fi
    for name in "${names[@]}"; do
      if [[ "$1" == "--$name" ]]; then
        [[ $# -ge 2 ]] || die "--$name needs a value" 2
        printf -v "${name//-/_}" '%s' "$2"
        shift 2
        continue 2
      fi
    done
    positional+=("$1")
    shift
  done
}
