#!/usr/bin/python3
"""Plots a metric of several ledgerlm runs against tokens (or steps) from their metrics.jsonl.

    scripts/plot_curves.py --out curves.png [--metric val_loss] [--x tokens] [--title T] \
        LABEL=runs/NAME [LABEL=runs/NAME ...]

Each LABEL=PATH names a run directory (or a metrics.jsonl file). Records without the metric
(e.g. training steps when plotting val_loss) and the final summary record are skipped. Needs
Debian's matplotlib: run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys


def read_series(path, metric, x_key):
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    xs, ys = [], []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_curves: {path}:{line_no}: not JSON ({e})")
            if rec.get("summary") or metric not in rec or x_key not in rec:
                continue
            xs.append(rec[x_key])
            ys.append(rec[metric])
    if not xs:
        sys.exit(f"plot_curves: {path}: no records with both '{x_key}' and '{metric}'")
    return xs, ys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output image (.png)")
    ap.add_argument("--metric", default="val_loss")
    ap.add_argument("--x", default="tokens", help="tokens | step | wall_s")
    ap.add_argument("--title", default="")
    ap.add_argument("--logy", action="store_true", help="logarithmic y axis")
    ap.add_argument("runs", nargs="+", help="LABEL=RUN_DIR or LABEL=metrics.jsonl")
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    # Distinct dash patterns and markers: curves that coincide stay visible on top of each other.
    styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    for i, item in enumerate(args.runs):
        if "=" not in item:
            sys.exit(f"plot_curves: expected LABEL=PATH, got '{item}'")
        label, path = item.split("=", 1)
        xs, ys = read_series(path, args.metric, args.x)
        ls, mk = styles[i % len(styles)]
        ax.plot(xs, ys, linestyle=ls, marker=mk, markersize=4, linewidth=1.6, label=label)
    ax.set_xlabel(args.x)
    ax.set_ylabel(args.metric)
    if args.logy:
        ax.set_yscale("log")
    if args.title:
        ax.set_title(args.title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, args.out)  # never leave a half-written image behind
    print(f"plot_curves: wrote {args.out}")


if __name__ == "__main__":
    main()
