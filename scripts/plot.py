#!/usr/bin/python3
"""Plots metrics of ledgerlm runs from their metrics.jsonl: one panel per metric, one curve per
run, or per group of runs (seeds of one configuration) drawn as their mean with a min-max band.

    scripts/plot.py --out curves.png [--metric val_loss,loss] [--x tokens] [--smooth N] \
        [--band] [--logx] [--logy] [--title T] RUN [RUN ...]

RUN is [LABEL=]PATH: a run directory, a metrics.jsonl file, or a directory of runs (every
subdirectory holding a metrics.jsonl, labelled by its name). Without LABEL a run is labelled by
its directory's name. --x is tokens, step, wall_s or train_s. --smooth N averages each curve over
a moving window of N points (train loss is noisy; val_* metrics, a few evaluations each a mean
already, are never smoothed). --band: runs that share a label are one curve, their mean, with the
band between the lowest and highest run at each step they share (x: the runs' mean x at that
step, so seeds band against wall_s too). An evaluation record takes the train_s of its step, so
val loss can be drawn against train_s. Records without the metric (e.g. evaluations when
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # loaded by path in tests too
from figures import pyplot  # noqa: E402

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


def series(records, metric, x_key="tokens", with_steps=False):
    """(xs, ys) of a metric over the records that carry it (summary excluded); with_steps: also
    each point's step. An evaluation record has no train_s: it takes the train_s of the training
    record of its step (evaluations happen after a step, outside the training seconds), so val
    loss can be drawn against the training time too."""
    xs, ys, steps = [], [], []
    last_x = {}  # step -> x of the last record of that step that had it
    for rec in records:
        if rec.get("summary"):
            continue
        x = rec.get(x_key)
        if x is None:
            x = last_x.get(rec.get("step"))
        elif rec.get("step") is not None:
            last_x[rec["step"]] = x
        if rec.get(metric) is None or x is None:
            continue
        xs.append(x)
        ys.append(rec[metric])
        steps.append(rec.get("step"))
    return (xs, ys, steps) if with_steps else (xs, ys)


def is_sparse(metric):
    """Evaluation metrics (val_*) come every eval_interval steps: a few points, each a mean over
    many windows already. A moving average over them would mix evaluations far apart."""
    return metric.startswith("val_")


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
    """[(xs, ys, steps)] of one group -> (xs, mean, lo, hi) over the steps every curve has, x the
    curves' mean x at that step: seeds share their tokens and steps, but not their seconds
    (wall_s, train_s), which would leave no x in common."""
    common = set(curves[0][2])
    for _, _, steps in curves[1:]:
        common &= set(steps)
    common.discard(None)
    keys = sorted(common)
    xs = [sum(dict(zip(st, cx))[k] for cx, _, st in curves) / len(curves) for k in keys]
    cols = [[dict(zip(st, cy))[k] for _, cy, st in curves] for k in keys]
    return xs, [sum(c) / len(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols]


def draw(ax, runs, metric, x_key="tokens", band=False, window=1):
    """Draws one metric of runs [(label, path or records)] on ax; returns the labels drawn."""
    groups, missing = {}, []
    for label, src in runs:
        recs = read_records(src) if isinstance(src, str) else src
        xs, ys, steps = series(recs, metric, x_key, with_steps=True)
        if not xs:
            missing.append(label)
            continue
        groups.setdefault(label if band else f"{label}#{len(groups)}", []).append((xs, ys, steps))
    # A run that stopped before its first eval (a diverged LR in a sweep) has no val_loss: it is
    # left out with a note, so one such run does not cost the figure of all the others.
    if not groups:
        who = missing[0] if len(missing) == 1 else f"none of the {len(missing)} runs"
        sys.exit(f"plot: {who}: no records with both '{x_key}' and '{metric}'")
    for label in missing:
        print(f"plot: {label}: no records with both '{x_key}' and '{metric}': left out",
              file=sys.stderr)
    if is_sparse(metric):
        window = 1
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
            xs, ys, _ = curves[0]
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
