#!/usr/bin/python3
"""Plots metrics of ledgerlm runs from their metrics.jsonl: one panel per metric, one curve per
run, or per group of runs (seeds of one configuration) drawn as their mean with a min-max band.

    scripts/plot.py --out curves.png [--metric val_loss,loss] [--x tokens] [--smooth N] \
        [--band] [--logx] [--logy] [--title T] RUN [RUN ...]

RUN is [LABEL=]PATH: a run directory, a metrics.jsonl file, or a directory of runs (every
subdirectory holding a metrics.jsonl, labelled by its name). Without LABEL a run is labelled by
its directory's name. --x is tokens, step, wall_s or train_s. --smooth N averages each curve over
a moving window of N points (train loss is noisy). --band: runs that share a label are one curve,
their mean, with the band between the lowest and highest run at each point (the curves must share
their x values: seeds of one configuration do). Records without the metric (e.g. evaluations when
plotting loss) and the final summary are skipped, and so is a last line cut by a kill (with a
note). --out's folder is created when missing.

The experiment reports (scripts/exp_*.sh) import this file for their figures. Needs Debian's
matplotlib: run with /usr/bin/python3.
"""
import argparse
import gzip
import json
import os
import sys

STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"),
          ("-.", "*")]


def metrics_path(path):
    """A run directory's metrics.jsonl, or its gzipped copy (metrics.jsonl.gz: the experiments'
    published runs under results/) where only that exists."""
    if not os.path.isdir(path):
        return path
    plain = os.path.join(path, "metrics.jsonl")
    return plain if os.path.exists(plain) or not os.path.exists(plain + ".gz") else plain + ".gz"


def read_records(path):
    """The JSON records of a run's metrics.jsonl (a run directory or the file itself)."""
    path = metrics_path(path)
    out = []
    try:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            lines = f.readlines()
    except OSError as e:
        sys.exit(f"plot: cannot read {path}: {e.strerror}")
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            # A run killed while writing leaves its last line cut (no newline): the records
            # before it are whole, so plot them and say what was left out.
            if line_no == len(lines) and not line.endswith("\n"):
                print(f"plot: {path}:{line_no}: skipped the incomplete last line (the run was "
                      "killed while writing it)", file=sys.stderr)
                continue
            sys.exit(f"plot: {path}:{line_no}: not JSON ({e})")
    return out


def series(records, metric, x_key="tokens"):
    """(xs, ys) of a metric over the records that carry both it and x (summary excluded)."""
    xs, ys = [], []
    for rec in records:
        if rec.get("summary") or rec.get(metric) is None or rec.get(x_key) is None:
            continue
        xs.append(rec[x_key])
        ys.append(rec[metric])
    return xs, ys


def smooth(ys, window):
    if window <= 1:
        return list(ys)
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def is_run(path):
    """Whether a directory holds a run's log (metrics.jsonl, or the published metrics.jsonl.gz)."""
    return os.path.exists(os.path.join(path, "metrics.jsonl")) or os.path.exists(
        os.path.join(path, "metrics.jsonl.gz"))


def expand_runs(items):
    """[LABEL=]PATH arguments -> [(label, run_path)], directories of runs expanded."""
    runs = []
    for item in items:
        label, path = item.split("=", 1) if "=" in item else (None, item)
        if os.path.isdir(path) and not is_run(path):
            subs = sorted(d for d in os.listdir(path) if is_run(os.path.join(path, d)))
            if not subs:
                sys.exit(f"plot: {path}: neither a run nor a directory of runs")
            runs += [(label or d, os.path.join(path, d)) for d in subs]
        else:
            name = os.path.basename(os.path.normpath(path))
            if name == "metrics.jsonl":
                name = os.path.basename(os.path.dirname(os.path.abspath(path)))
            runs.append((label or name, path))
    return runs


def group_curves(curves):
    """[(xs, ys)] of one group -> (xs, mean, lo, hi) over the x values every curve has."""
    common = set(curves[0][0])
    for xs, _ in curves[1:]:
        common &= set(xs)
    xs = sorted(common)
    cols = [[dict(zip(cx, cy))[x] for cx, cy in curves] for x in xs]
    return xs, [sum(c) / len(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols]


def draw(ax, runs, metric, x_key="tokens", band=False, window=1):
    """Draws one metric of runs [(label, path or records)] on ax; returns the labels drawn."""
    groups = {}
    for label, src in runs:
        recs = read_records(src) if isinstance(src, str) else src
        xs, ys = series(recs, metric, x_key)
        if not xs:
            sys.exit(f"plot: {label}: no records with both '{x_key}' and '{metric}'")
        groups.setdefault(label if band else f"{label}#{len(groups)}", []).append((xs, ys))
    for i, (key, curves) in enumerate(groups.items()):
        label = key if band else key.rsplit("#", 1)[0]
        ls, mk = STYLES[i % len(STYLES)]
        marker = dict(marker=mk, markersize=3.5) if len(curves[0][0]) <= 60 else {}
        if len(curves) > 1:
            xs, mean, lo, hi = group_curves(curves)
            line, = ax.plot(xs, smooth(mean, window), linestyle=ls, linewidth=1.6,
                            label=f"{label} (mean of {len(curves)})", **marker)
            ax.fill_between(xs, smooth(lo, window), smooth(hi, window), alpha=0.2,
                            color=line.get_color(), linewidth=0)
        else:
            xs, ys = curves[0]
            ax.plot(xs, smooth(ys, window), linestyle=ls, linewidth=1.6, label=label, **marker)
    ax.set_xlabel(x_key)
    ax.set_ylabel(metric)
    ax.grid(True, alpha=0.3)
    return list(groups)


def save(fig, out):
    folder = os.path.dirname(out)
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)  # --out into a folder not made yet
    except OSError as e:
        sys.exit(f"plot: cannot create the folder of --out {out}: {e.strerror}")
    tmp = out + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, out)  # never leave a half-written image behind


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    import matplotlib.pyplot as plt

    return plt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output image (.png)")
    ap.add_argument("--metric", default="val_loss", help="one or more, comma-separated")
    ap.add_argument("--x", default="tokens", choices=["tokens", "step", "wall_s", "train_s"])
    ap.add_argument("--smooth", type=int, default=1, help="moving-average window (points)")
    ap.add_argument("--band", action="store_true", help="runs sharing a label: mean + min-max")
    ap.add_argument("--title", default="")
    ap.add_argument("--logx", action="store_true", help="logarithmic x axis")
    ap.add_argument("--logy", action="store_true", help="logarithmic y axis")
    ap.add_argument("runs", nargs="+", help="[LABEL=]RUN_DIR | metrics.jsonl | DIR of runs")
    args = ap.parse_args()

    runs = expand_runs(args.runs)
    metrics = [m for m in args.metric.split(",") if m]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.5), dpi=120,
                             squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        draw(ax, runs, metric, args.x, args.band, args.smooth)
        if args.logx:
            ax.set_xscale("log")
        if args.logy:
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    save(fig, args.out)
    print(f"plot: wrote {args.out}")


if __name__ == "__main__":
    main()
