"""Training losses of runs that gpu_check.sh's train_small stage compares, read from each run's
metrics.jsonl (and summary.json for the Comm it used).

  run_losses.py compare GPU_RUN CPU_RUN [LABEL]
                                          the largest relative loss difference over the steps both
                                          logged, and the GPU run's first and last loss (exit 0);
                                          LABEL names the runs' shape (default: small shape)
  run_losses.py bitwise PLAIN OTHER COMM  OTHER's losses equal PLAIN's bit for bit at the same
                                          steps and its summary.json says comm = COMM (else exit 1)
"""
import json
import sys


def losses(run):
    """{step: loss} of a run directory; {} when it has no metrics (the run failed to start)."""
    try:
        with open(f"{run}/metrics.jsonl") as f:
            return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}
    except OSError:
        return {}


def comm(run):
    try:
        with open(f"{run}/summary.json") as f:
            return json.load(f).get("comm")
    except (OSError, ValueError):
        return None


def compare(gpu_run, cpu_run, label="small shape"):
    g, c = losses(gpu_run), losses(cpu_run)
    common = sorted(set(g) & set(c))
    if common:
        worst = max(abs(g[s] - c[s]) / abs(c[s]) for s in common)
        print(f"{label}, steps 1..{common[-1]}: max relative loss difference GPU vs CPU "
              f"{worst:.2e}")
    if g:
        print(f"{label} on the GPU: loss {g[min(g)]:.4f} at step {min(g)} -> "
              f"{g[max(g)]:.4f} at step {max(g)}")
    return 0


def bitwise(plain_run, other_run, want_comm):
    plain, other = losses(plain_run), losses(other_run)
    if not plain or sorted(plain) != sorted(other):
        print(f"dist.comm = {want_comm}: steps {sorted(other)} vs the plain run's {sorted(plain)}")
        return 1
    worst = max(plain, key=lambda s: abs(plain[s] - other[s]))
    diff = abs(plain[worst] - other[worst])
    print(f"dist.comm = {want_comm}, one rank, steps 1..{max(plain)}: comm {comm(other_run)} vs "
          f"{comm(plain_run)}; max |loss difference| vs the plain run {diff:.3e} at step {worst} "
          f"({other[worst]!r} vs {plain[worst]!r}; must be 0: bit for bit)")
    return 0 if diff == 0 and comm(other_run) == want_comm else 1


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "compare":
        sys.exit(compare(*sys.argv[2:]))
    if len(sys.argv) == 5 and sys.argv[1] == "bitwise":
        sys.exit(bitwise(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit(__doc__)
