#!/usr/bin/python3
"""scripts/plot.py's curves on synthetic metrics logs (no training), what it draws read back from
the matplotlib axes: --smooth leaves the sparse val curve as evaluated; --band against wall_s
(seeds that do not share their seconds) draws the mean and its band; val loss drawn against
train_s (evaluation records carry no train_s of their own). Run by ctest (PlotCurves), about 2 s.

Usage: tests/tools/test_plot.py [PATH_TO_plot.py]   (default: scripts/plot.py of this checkout)
"""
import importlib.util
import sys
from pathlib import Path

path = Path(sys.argv[1]) if len(sys.argv) > 1 else \
    Path(__file__).resolve().parents[2] / "scripts" / "plot.py"
spec = importlib.util.spec_from_file_location("plot", path)
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)
plt = plot.pyplot()
failures = []


def run_log(seed):
    """Ten training steps (loss 10 - step, seconds that differ by seed) and an evaluation after
    steps 5 and 10, as train_loop writes them: the evaluation record has wall_s but no train_s."""
    recs = []
    for step in range(1, 11):
        recs.append({"step": step, "tokens": 100 * step, "loss": 10.0 - step + 0.1 * seed,
                     "train_s": 0.1 * step + 0.01 * seed, "wall_s": 0.11 * step + 0.01 * seed})
        if step % 5 == 0:
            recs.append({"step": step, "tokens": 100 * step, "val_loss": 20.0 / step + seed,
                         "wall_s": 0.11 * step + 0.02 * seed})
    recs.append({"summary": True, "status": "finished"})
    return recs


def drawn(runs, metric, x, band=False, window=1):
    fig, ax = plt.subplots()
    try:
        plot.draw(ax, runs, metric, x, band, window)
    except SystemExit as e:
        plt.close(fig)
        return None, str(e)
    lines = [(list(l.get_xdata()), list(l.get_ydata())) for l in ax.get_lines()]
    bands = len(ax.collections)
    plt.close(fig)
    return (lines, bands), ""


# 1. --smooth 3 on val_loss: the two evaluations as they were (a moving average would make the
# second (5 + 3) / 2 = 4). Exact equality: the values are drawn as given, no arithmetic.
got, err = drawn([("a", run_log(1))], "val_loss", "tokens", window=3)
if got is None or got[0][0][1] != [20.0 / 5 + 1, 20.0 / 10 + 1]:
    failures.append(f"--smooth smoothed the val curve: drawn {got and got[0][0][1]} {err}, "
                    "want [5.0, 3.0]")
# ... while the train loss is still smoothed: its second point is the mean of the first two.
got, err = drawn([("a", run_log(1))], "loss", "tokens", window=3)
if got is None or abs(got[0][0][1][1] - (9.1 + 8.1) / 2) > 1e-12:
    failures.append(f"--smooth no longer smooths the train loss: {got and got[0][0][1][:2]} {err}")

# 2. --band over two seeds against wall_s: one mean curve of the 10 steps and one band. Mean x
# and y at step 1: wall_s (0.12 + 0.13) / 2 = 0.125, loss (9.1 + 9.2) / 2 = 9.15; the tolerance
# 1e-12 covers the rounding of two additions and a halving.
got, err = drawn([("A", run_log(1)), ("A", run_log(2))], "loss", "wall_s", band=True)
if got is None or len(got[0]) != 1 or len(got[0][0][0]) != 10 or got[1] != 1:
    failures.append(f"--band --x wall_s: drawn {got and [len(l[0]) for l in got[0]]} points, "
                    f"{got and got[1]} bands {err}; want one curve of 10 points and one band")
elif abs(got[0][0][0][0] - 0.125) > 1e-12 or abs(got[0][0][1][0] - 9.15) > 1e-12:
    failures.append(f"--band --x wall_s: first point ({got[0][0][0][0]}, {got[0][0][1][0]}), "
                    "want (0.125, 9.15)")

# 3. val_loss against train_s: the evaluations at the train_s of their steps (0.51, 1.01).
got, err = drawn([("a", run_log(1))], "val_loss", "train_s")
if got is None or [round(x, 12) for x in got[0][0][0]] != [0.51, 1.01]:
    failures.append(f"val_loss vs train_s: drawn at {got and got[0][0][0]} {err}, "
                    "want [0.51, 1.01]")

for f in failures:
    print("FAIL:", f)
print("plot curves:", "FAILED" if failures else "all checks passed")
sys.exit(1 if failures else 0)
