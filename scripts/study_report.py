#!/usr/bin/python3
"""The report of a study directory (ledgerlm study plan / run): DIR/REPORT.md and PNGs from the
runs that have finished so far.

An arm is the runs that differ only by train.seed; its name is the run name without the seed.
Per arm: mean final val loss with its 95% confidence interval (Student t over the seeds). Against
the study's baseline arm (`baseline = "ARM"` in the study file): the paired-by-seed difference
(arm minus baseline, on the seeds both have) with its t interval and a paired t test, the
p-values Holm-corrected over the comparisons; each comparison's corrected interval is the t
interval at the level Holm assigns to its rank (1 - alpha / (m - rank)). A winner is named only
where a corrected comparison excludes 0, else "no winner at this n". Runs that failed (diverged),
whose final loss rose above their initial loss, or that never beat the unigram baseline of their
data are listed and kept out of the statistics. The loss compared is the final val loss over the
whole val split (study_eval.json, written by `study run`), else the summary's windowed val loss
(the report then says so).

Usage: scripts/study_report.py DIR [--alpha 0.05]
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
from scipy import stats

ALPHA = 0.05


# ---- statistics (tests/tools/test_study_report.py checks them against hand-computed values) ----

def t_interval(xs, confidence=0.95):
    """(mean, low, high) of the Student t interval; low/high are None below 2 values."""
    xs = np.asarray(xs, dtype=float)
    mean = float(xs.mean())
    if xs.size < 2:
        return mean, None, None
    half = stats.t.ppf(0.5 + confidence / 2, xs.size - 1) * xs.std(ddof=1) / math.sqrt(xs.size)
    return mean, mean - half, mean + half


def paired_difference(arm, base, confidence=0.95):
    """arm, base: {seed: loss}. The difference arm - base over the common seeds:
    dict(n, mean, low, high, p), p the two-sided paired t test (None below 2 pairs)."""
    seeds = sorted(set(arm) & set(base))
    d = np.array([arm[s] - base[s] for s in seeds], dtype=float)
    if d.size == 0:
        return {"n": 0, "mean": None, "low": None, "high": None, "p": None, "seeds": seeds}
    mean, low, high = t_interval(d, confidence)
    p = None
    if d.size >= 2:
        sd = d.std(ddof=1)
        if sd == 0:
            p = 0.0 if mean != 0 else 1.0
        else:
            t = mean / (sd / math.sqrt(d.size))
            p = float(2 * stats.t.sf(abs(t), d.size - 1))
    return {"n": int(d.size), "mean": mean, "low": low, "high": high, "p": p, "seeds": seeds}


def holm(pvalues):
    """Holm-adjusted p-values (same order as given) and each one's rank in the step-down."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m = len(pvalues)
    adjusted, ranks, running = [0.0] * m, [0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i], ranks[i] = running, rank
    return adjusted, ranks


def verdict(comparisons, baseline, alpha=ALPHA):
    """comparisons: {arm: paired_difference(...) plus "p_holm"}. Lower loss is better. The
    winner: the best arm whose corrected comparison shows it below the baseline; the baseline
    when every other arm is corrected-significantly above it; else None."""
    better = [(c["mean"], a) for a, c in comparisons.items()
              if c.get("p_holm") is not None and c["p_holm"] < alpha and c["mean"] < 0]
    if better:
        return min(better)[1]
    if comparisons and all(c.get("p_holm") is not None and c["p_holm"] < alpha and c["mean"] > 0
                           for c in comparisons.values()):
        return baseline
    return None


def classify(status, initial_loss, final_loss, unigram):
    """"ok", or why a run is kept out: failed | unstable | no better than unigram."""
    if status != "finished" or final_loss is None or not math.isfinite(final_loss):
        return "failed"
    if initial_loss is not None and final_loss > initial_loss:
        return "unstable (final loss above the initial loss)"
    if unigram is not None and final_loss >= unigram:
        return "failed (never beat the unigram baseline)"
    return "ok"


# ---- reading the study ----

def unigram_loss(data_dir, cache={}):
    """The val loss (nats/token) of add-one unigram counts of the train split; None if unread."""
    if data_dir in cache:
        return cache[data_dir]
    try:
        meta = json.loads((Path(data_dir) / "meta.json").read_text())
        width, vocab = int(meta["token_width"]), int(meta["vocab_size"])

        def load(split):
            # Token shard format 2 (data/shard.h): a 32-byte header (magic, version, width,
            # token count at bytes 16-24, ...), the ids, then the checksum table.
            raw = (Path(data_dir) / f"{split}.bin").read_bytes()
            if raw[:8] != b"LLMTOKS1" or int.from_bytes(raw[8:12], "little") != 2:
                raise ValueError(f"{data_dir}/{split}.bin is not a format-2 token shard")
            count = int.from_bytes(raw[16:24], "little")
            dtype = {2: np.uint16, 4: np.uint32}[width]
            return np.frombuffer(raw[32:], dtype=dtype, count=count).astype(np.int64)

        counts = np.bincount(load("train"), minlength=vocab).astype(float) + 1.0
        p = counts / counts.sum()
        cache[data_dir] = float(-np.log(p[load("val")]).mean())
    except (OSError, KeyError, ValueError):
        cache[data_dir] = None
    return cache[data_dir]


def read_run(study, entry):
    run_dir = Path(study) / "runs" / entry["name"]
    run = {"name": entry["name"], "axes": entry.get("axes", {}), "dir": run_dir,
           "status": "pending", "summary": {}, "full": None, "initial": None, "data": None}
    try:
        run["summary"] = json.loads((run_dir / "summary.json").read_text())
        run["status"] = run["summary"].get("status", "pending")
    except (OSError, ValueError):
        return run
    try:
        run["full"] = json.loads((run_dir / "study_eval.json").read_text())["full_val_loss"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(run_dir / "metrics.jsonl") as f:
            for line in f:
                rec = json.loads(line)
                if "loss" in rec and "step" in rec:
                    run["initial"] = rec["loss"]
                    break
        cfg = tomllib.loads((run_dir / "config.toml").read_text())
        run["data"] = cfg.get("data", {}).get("dir")
    except (OSError, ValueError):
        pass
    return run


def arm_of(run):
    seed = run["axes"].get("train.seed")
    name = run["name"]
    for suffix in (f"_seed{seed}", f"_train-seed{seed}"):
        if seed is not None and name.endswith(suffix):
            return name[: -len(suffix)]
    if seed is not None and name in (f"seed{seed}", f"train-seed{seed}"):
        return "all"
    return name


def fmt(x, digits=4):
    return "-" if x is None else f"{x:.{digits}f}"


def machine():
    cpu = "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
                break
    except (OSError, subprocess.CalledProcessError):
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def version():
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return head + (" (with uncommitted changes)" if dirty else "")


def lr_plot(study, arms, runs_by_arm, out):
    """Final val loss vs LR, one line per optimizer (and other axes), a 95% CI band."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    series = {}
    for arm, runs in runs_by_arm.items():
        axes = runs[0]["axes"]
        if "optim.lr" not in axes:
            continue
        label = ", ".join(f"{k}={v}" for k, v in sorted(axes.items())
                          if k not in ("optim.lr", "train.seed")) or "runs"
        series.setdefault(label, []).append((float(axes["optim.lr"]), arms[arm]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for label, points in sorted(series.items()):
        points.sort()
        lrs = [p[0] for p in points]
        means = [p[1]["mean"] for p in points]
        ax.plot(lrs, means, marker="o", label=label)
        lo = [p[1]["low"] if p[1]["low"] is not None else p[1]["mean"] for p in points]
        hi = [p[1]["high"] if p[1]["high"] is not None else p[1]["mean"] for p in points]
        ax.fill_between(lrs, lo, hi, alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("LR (optim.lr)")
    ax.set_ylabel("final val loss (mean, 95% CI over seeds)")
    ax.set_title(f"LR sensitivity: {study}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out.name


def report(study_dir, alpha=ALPHA):
    study = Path(study_dir)
    manifest = json.loads((study / "manifest.json").read_text())
    runs = [read_run(study, e) for e in manifest["runs"]]
    done = [r for r in runs if r["status"] in ("finished", "failed")]
    full = bool(done) and all(r["full"] is not None for r in done if r["status"] == "finished")
    for r in done:
        r["loss"] = r["full"] if full else r["summary"].get("final_val_loss")
        unigram = unigram_loss(r["data"]) if r["data"] else None
        r["unigram"] = unigram
        r["flag"] = classify(r["status"], r["initial"], r["loss"], unigram)
    good = [r for r in done if r["flag"] == "ok"]
    runs_by_arm = {}
    for r in good:
        runs_by_arm.setdefault(arm_of(r), []).append(r)
    arms = {}
    for arm, rs in runs_by_arm.items():
        mean, low, high = t_interval([r["loss"] for r in rs])
        tokens = np.mean([r["summary"].get("tokens", 0) for r in rs])
        params = np.mean([r["summary"].get("params", 0) for r in rs])
        arms[arm] = {"n": len(rs), "mean": mean, "low": low, "high": high,
                     "tokens_per_param": tokens / params if params else None,
                     "seeds": {r["axes"].get("train.seed", r["name"]): r["loss"] for r in rs}}

    lines = [f"# Study {manifest.get('name', study.name)}", "",
             f"- Written by scripts/study_report.py (`ledgerlm study report {study_dir}`) from "
             f"{len(done)} of {len(manifest['runs'])} planned runs ({len(good)} kept).",
             f"- Study file: {manifest.get('study')}; base config: "
             f"{manifest.get('config') or '(none: [base] keys only)'}.",
             f"- Commit: {version()}.",
             f"- CPU: {machine()}.",
             ("- Loss compared: the final val loss over the whole val split (`ledgerlm eval`, "
              "runs/NAME/study_eval.json)." if full else
              "- Loss compared: the summary's final val loss, over train.eval_windows val "
              "windows only (not the whole split: some runs have no study_eval.json; "
              "`ledgerlm study run` writes it)."),
             f"- Intervals: 95% Student t over seeds; comparisons Holm-corrected at alpha = "
             f"{alpha}.", ""]

    lines += ["## Arms", "", "| arm | n | mean final val loss | 95% CI | tokens per parameter |",
              "|---|---|---|---|---|"]
    for arm, a in sorted(arms.items(), key=lambda kv: kv[1]["mean"]):
        ci = f"[{fmt(a['low'])}, {fmt(a['high'])}]" if a["low"] is not None else "(n < 2)"
        lines.append(f"| {arm} | {a['n']} | {fmt(a['mean'])} | {ci} | "
                     f"{fmt(a['tokens_per_param'], 2)} |")
    lines.append("")

    baseline = manifest.get("baseline")
    lines += ["## Against the baseline", ""]
    if not baseline:
        lines += ["No baseline arm named (`baseline = \"ARM\"` in the study file): no "
                  "comparisons.", ""]
    elif baseline not in arms:
        lines += [f"The baseline arm `{baseline}` has no kept runs (arms: "
                  f"{', '.join(sorted(arms)) or 'none'}): no comparisons.", ""]
    else:
        comps = {a: paired_difference(arms[a]["seeds"], arms[baseline]["seeds"])
                 for a in sorted(arms) if a != baseline}
        testable = {a: c for a, c in comps.items() if c["p"] is not None}
        names = sorted(testable)
        adjusted, ranks = holm([testable[a]["p"] for a in names])
        m = len(names)
        for a, p_adj, rank in zip(names, adjusted, ranks):
            level = 1 - alpha / (m - rank)
            _, lo, hi = t_interval([arms[a]["seeds"][s] - arms[baseline]["seeds"][s]
                                    for s in testable[a]["seeds"]], level)
            testable[a].update(p_holm=p_adj, corr_low=lo, corr_high=hi, level=level)
        lines += [f"Paired by seed: arm minus `{baseline}` (negative: lower loss than the "
                  "baseline).", "",
                  "| arm | pairs | mean difference | 95% CI | p | p (Holm) | corrected CI |",
                  "|---|---|---|---|---|---|---|"]
        for a, c in comps.items():
            ci = f"[{fmt(c['low'])}, {fmt(c['high'])}]" if c["low"] is not None else "(n < 2)"
            corr = (f"[{fmt(c['corr_low'])}, {fmt(c['corr_high'])}] at "
                    f"{100 * c['level']:.2f}%" if "corr_low" in c else "-")
            lines.append(f"| {a} | {c['n']} | {fmt(c['mean'])} | {ci} | {fmt(c['p'], 3)} | "
                         f"{fmt(c.get('p_holm'), 3)} | {corr} |")
        winner = verdict(testable, baseline, alpha)
        lines += ["", f"**Winner: {winner}**" if winner else "**No winner at this n**", ""]

    flagged = [r for r in done if r["flag"] != "ok"]
    lines += ["## Runs kept out", ""]
    if flagged:
        lines += ["| run | why | initial loss | final loss | unigram |", "|---|---|---|---|---|"]
        lines += [f"| {r['name']} | {r['flag']} | {fmt(r['initial'])} | {fmt(r['loss'])} | "
                  f"{fmt(r['unigram'])} |" for r in flagged]
    else:
        lines.append("None.")
    pending = [r["name"] for r in runs if r not in done]
    if pending:
        lines += ["", f"Not finished yet ({len(pending)}): {', '.join(pending)}."]
    lines.append("")

    png = lr_plot(manifest.get("name", study.name), arms, runs_by_arm, study / "lr_sensitivity.png")
    if png:
        lines += ["## LR sensitivity", "", f"![final val loss vs LR]({png})", "",
                  "Runs kept out (above) are not drawn: an LR whose runs all failed has no "
                  "point.", ""]

    lines += ["## Runs", "", "| run | status | steps | tokens | params | final val loss |",
              "|---|---|---|---|---|---|"]
    for r in done:
        s = r["summary"]
        lines.append(f"| {r['name']} | {r['status']} | {s.get('steps', '-')} | "
                     f"{s.get('tokens', '-')} | {s.get('params', '-')} | {fmt(r['loss'])} |")
    (study / "REPORT.md").write_text("\n".join(lines) + "\n")
    return study / "REPORT.md"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--alpha", type=float, default=ALPHA)
    args = ap.parse_args()
    if not (Path(args.dir) / "manifest.json").is_file():
        sys.exit(f"study_report: error: {args.dir}/manifest.json not found (ledgerlm study plan)")
    print(f"study report: {report(args.dir, args.alpha)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
