#!/usr/bin/python3
"""Tables and a stacked-bar chart of the memory ledger of several runs (scripts/exp/exp_memory.sh).

Reads a manifest (TSV: group, label, run directory), each run's ledger.json (predicted and
measured bytes per component), and writes a Markdown table of measured MB (1e6 bytes) per
component with the prediction's error, plus a PNG of stacked bars of measured bytes per component,
one panel per group. The accuracy bar checked per run: model-state components within 1% of
measured, activations and the total peak within 10%.
"""
import argparse
import json
import math
import os
import sys

MODEL_STATE = ["params", "grads", "master", "optim.m", "optim.v", "optim.momentum",
               "optim.codes", "optim.absmax", "optim.factored"]
ORDER = MODEL_STATE + ["activations", "workspace", "comm", "data", "other"]


def load(manifest):
    runs = []
    with open(manifest) as f:
        for line in f:
            if not line.strip():
                continue
            group, label, run_dir = line.rstrip("\n").split("\t")
            path = os.path.join(run_dir, "ledger.json")
            try:
                with open(path) as lf:
                    ledger = json.load(lf)
            except (OSError, ValueError) as e:
                sys.exit(f"plot_memory: error: cannot read {path}: {e}")
            version = ledger.get("format_version")
            if ledger.get("format") != "ledgerlm-ledger" or version not in (1, 2):
                sys.exit(f"plot_memory: error: {path}: expected a ledgerlm ledger of format_version "
                         f"1 or 2 (got {ledger.get('format')!r} version {version!r})")
            runs.append((group, label, ledger))
    if not runs:
        sys.exit(f"plot_memory: error: {manifest} lists no runs")
    return runs


def components(ledger):
    m = ledger["measured"]
    return [c for c in ORDER if c in m]


def check_bar(ledger):
    """Worst relative errors: (model state, activations, peak) and whether the bar holds."""
    m = ledger["measured"]
    def err(key):
        e = m.get(key, {}).get("error")
        return abs(e) if e is not None else math.inf
    ms = max([err(c) for c in MODEL_STATE if c in m] or [0.0])
    act = err("activations") if "activations" in m else 0.0
    peak = err("total")
    return ms, act, peak, ms <= 0.01 and act <= 0.10 and peak <= 0.10


def write_table(runs, path):
    cols = [c for c in ORDER if any(c in r[2]["measured"] for r in runs)]
    lines = ["# Memory ledger: measured peak per component (MB = 1e6 bytes)", ""]
    lines.append("| group | run | " + " | ".join(cols) +
                 " | peak | predicted peak | model-state err | act. err | peak err | bar |")
    lines.append("|" + "---|" * (len(cols) + 8))
    for group, label, ledger in runs:
        m = ledger["measured"]
        cells = [f"{m[c]['peak'] / 1e6:.3f}" if c in m else "-" for c in cols]
        ms, act, peak, ok = check_bar(ledger)
        lines.append(f"| {group} | {label} | " + " | ".join(cells) +
                     f" | {m['total']['peak'] / 1e6:.3f} | {m['total']['predicted'] / 1e6:.3f}"
                     f" | {100 * ms:.2f}% | {100 * act:.2f}% | {100 * peak:.2f}% |"
                     f" {'ok' if ok else 'MISSED'} |")
    lines.append("")
    lines.append("Untracked bytes (RSS high-water growth since process start minus tracked peak):")
    lines.append("")
    lines.append("| run | tracked peak MB | RSS growth MB | untracked MB |")
    lines.append("|---|---|---|---|")
    for group, label, ledger in runs:
        p = ledger["measured"].get("process", {})
        lines.append(f"| {group}: {label} | {ledger['measured']['total']['peak'] / 1e6:.3f} |"
                     f" {p.get('growth', 0) / 1e6:.3f} | {p.get('untracked', 0) / 1e6:.3f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_png(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = []
    for g, _, _ in runs:
        if g not in groups:
            groups.append(g)
    cols = [c for c in ORDER if any(c in r[2]["measured"] for r in runs)]
    cmap = plt.get_cmap("tab20")
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 5), squeeze=False)
    for ax, g in zip(axes[0], groups):
        sub = [(lab, led) for gg, lab, led in runs if gg == g]
        bottoms = [0.0] * len(sub)
        for ci, c in enumerate(cols):
            vals = [led["measured"].get(c, {}).get("peak", 0) / 1e6 for _, led in sub]
            ax.bar(range(len(sub)), vals, bottom=bottoms, color=cmap(ci % 20),
                   label=c if g == groups[0] else None)
            bottoms = [b + v for b, v in zip(bottoms, vals)]
        preds = [led["measured"]["total"]["predicted"] / 1e6 for _, led in sub]
        ax.scatter(range(len(sub)), preds, marker="_", s=400, color="black", zorder=3,
                   label="predicted peak" if g == groups[0] else None)
        ax.set_xticks(range(len(sub)))
        ax.set_xticklabels([lab for lab, _ in sub], rotation=30, ha="right", fontsize=8)
        ax.set_title(g)
        ax.set_ylabel("measured MB (1e6 bytes)")
    fig.legend(loc="upper center", ncol=min(8, len(cols) + 1), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--png", required=True)
    a = ap.parse_args()
    runs = load(a.manifest)
    write_table(runs, a.table)
    write_png(runs, a.png)


if __name__ == "__main__":
    main()
