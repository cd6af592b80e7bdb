#!/usr/bin/python3
"""The report of a study directory (ledgerlm study plan / run): DIR/REPORT.md and PNGs from the
runs that have finished so far.

An arm is the runs that differ only by train.seed; its name is the run name without the seed.
Per arm: mean final val loss with its 95% confidence interval (Student t over the seeds). Against
a baseline arm: the paired-by-seed difference (arm minus baseline, on the seeds both have) with
its t interval and a paired t test, the p-values Holm-corrected over the comparisons; each
comparison's corrected interval is the t interval at the level Holm assigns to its rank
(1 - alpha / (m - rank)). A winner is named only where a corrected comparison excludes 0, else
"no winner at this n". Runs that failed (diverged), whose final loss rose above their initial
loss, or that never beat the unigram baseline of their data are listed and kept out of the
statistics. The loss compared is the final loss over the whole held-out split (study_eval.json,
written by `study run`), else the summary's windowed val loss (the report then says so).

Studies without [finals]: the arms are the runs' settings and `baseline = "ARM"` names one.
Studies with [finals] (manifest "finals", runs with "phase": "final"): the sweep runs select one
setting per arm (lowest median full-val loss over its sweep seeds; the selection section shows
the choice, LR-edge notes and heatmaps), the finals retrain each chosen setting on fresh seeds and are compared on the
reported split (test where the data has one), `baseline` then naming an optim.name: each group of
arms sharing the select axes other than optim.name (one per token budget; the wall-clock arms
form their own) is compared against its arm of that optimizer, Holm over the group. The finals'
eval curves give tokens to the final loss of the baseline's median seed and speedups with
bootstrap intervals (scripts/seed_stats.py, which also gives the failure rates' exact intervals
and the smallest effect the design could detect); their summaries the cost per optimizer. When
the finals select on train.max_tokens (a budget ladder), scripts/data_equivalent.py adds the
data-equivalent speedup: the baseline's final loss fitted against tokens, inverted at each arm's.

Provenance: every run records the build that trained it (summary.json and the first metrics
record of each start: commit and dirty flag). Runs from a build with uncommitted changes are
refused unless --allow-dirty, runs from several builds unless --allow-mixed-builds (one line,
exit 1, nothing written); with the flag the report says so at its top. Runs that record no build
(trained before ledgerlm recorded one) are reported under a PROVENANCE UNKNOWN banner. A
wall-clock group names no winner when a run trained outside +-5% of the seconds asked or the
machine was loaded at the start (mean 1-minute load average above cores - 0.5).

Studies with "objective": "steps_to_target" also get scripts/batch_science.py's sections: steps
to the target loss per global batch, the critical batch, the LR rules and B_simple.

Usage: scripts/study_report.py DIR [--alpha 0.05] [--allow-dirty] [--allow-mixed-builds]
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

try:
    import matplotlib  # noqa: F401  (figures.py draws with it)
    import numpy as np
    from scipy import stats
except ImportError as e:
    # An installed ledgerlm recommends these packages; a machine without them gets one line.
    sys.exit(f"ledgerlm: error: study report needs numpy, scipy and matplotlib ({e}): "
             "apt-get install python3-numpy python3-scipy python3-matplotlib")

# No __pycache__ beside the programs: an installed copy (/usr/share/ledgerlm) belongs to the package.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_science  # noqa: E402
import data_equivalent  # noqa: E402
import figures  # noqa: E402
import seed_stats  # noqa: E402
import split_equivalence  # noqa: E402
import ngram_baselines  # noqa: E402
import seed_robustness  # noqa: E402

ALPHA = 0.05
WALL_TOLERANCE = 0.05  # a wall-clock final must train within 5% of the seconds asked
OPTIM = "optim.name"
SEED = "train.seed"
LR = "optim.lr"


# ---- statistics (tests/tools/test_study_report.py checks them against hand-computed values) ----

# (mean, low, high) of the Student t interval; low/high are None below 2 values. One definition
# for this report and batch_science's steps to target.
t_interval = batch_science.t_interval


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


# ---- finals: curves, groups, costs, the wall-clock rule (checked by hand in the tests) ----

def mean_curve(curves):
    """curves: per seed a list of (tokens, loss) eval points. The mean over seeds point by point
    (seeds of one arm evaluate at the same steps), cut to the shortest curve: (tokens, losses)."""
    curves = [c for c in curves if c]
    if not curves:
        return [], []
    n = min(len(c) for c in curves)
    tokens = [float(np.mean([c[i][0] for c in curves])) for i in range(n)]
    losses = [float(np.mean([c[i][1] for c in curves])) for i in range(n)]
    return tokens, losses


def tokens_to_target(tokens, losses, target):
    """The tokens at which the curve first reaches TARGET (loss <= target), linearly
    interpolated between the eval points around the crossing; None if it never does."""
    for i, (t, loss) in enumerate(zip(tokens, losses)):
        if loss <= target:
            if i == 0:
                return float(t)
            t0, l0 = tokens[i - 1], losses[i - 1]
            return float(t0 + (l0 - target) * (t - t0) / (l0 - loss))
    return None


def speedup(baseline_tokens, arm_tokens):
    """How many times fewer tokens the arm needs to reach the target; None if either did not."""
    if baseline_tokens is None or not arm_tokens:
        return None
    return baseline_tokens / arm_tokens


def group_of(axes, select, wall_clock):
    """The comparison group of a final arm: the select axes other than optim.name, or all the
    wall-clock arms together."""
    if wall_clock:
        return ("wall clock",)
    return tuple((k, axes.get(k)) for k in select if k != OPTIM)


def group_label(key):
    if key == ("wall clock",):
        return "wall clock"
    return ", ".join(f"{k} = {v}" for k, v in key) or "all finals"


def finals_groups(final_arms, select, baseline):
    """final_arms: {arm: {"axes", "wall_clock"}}. {group key: {"arms": [...], "baseline": the arm
    whose optim.name is BASELINE or None}}."""
    def order(arm):  # budgets by value (1e5 before 1e6 tokens), the wall-clock group last
        info = final_arms[arm]
        key = group_of(info["axes"], select, info["wall_clock"])
        return (info["wall_clock"], [value_order(v) for _, v in key] if not info["wall_clock"]
                else [], arm)

    groups = {}
    for arm in sorted(final_arms, key=order):
        info = final_arms[arm]
        g = groups.setdefault(group_of(info["axes"], select, info["wall_clock"]),
                              {"arms": [], "baseline": None})
        g["arms"].append(arm)
        if baseline is not None and info["axes"].get(OPTIM) == baseline:
            g["baseline"] = arm
    return groups


def cost_rows(runs):
    """Per optimizer (mean over its finished runs): optimizer ms per step, step ms
    (train_s * 1000 / steps), the optimizer's share of the step, optimizer state bytes per
    parameter (the mem components named optim.*, at their peak), peak tracked memory,
    checkpoint and weights bytes, tokens/s."""
    by_opt = {}
    for r in runs:
        s = r["summary"]
        if r["status"] != "finished" or not s.get("steps") or not s.get("params"):
            continue
        mem = s.get("mem", {})
        state = sum(v.get("peak", 0) for k, v in mem.items()
                    if k.startswith("optim.") and isinstance(v, dict))
        step_ms = s.get("train_s", 0) * 1000.0 / s["steps"]
        optim_ms = s.get("mean_optim_ms")
        by_opt.setdefault(r["axes"].get(OPTIM, "-"), []).append({
            "optim_ms": optim_ms, "step_ms": step_ms,
            "share": optim_ms / step_ms if optim_ms is not None and step_ms > 0 else None,
            "state_per_param": state / s["params"],
            "peak": mem.get("total", {}).get("peak"), "ckpt": s.get("ckpt_bytes"),
            "weights": s.get("weights_bytes"), "tokens_per_s": s.get("mean_tokens_per_s")})
    out = {}
    for opt, rows in sorted(by_opt.items()):
        out[opt] = {"runs": len(rows)}
        for k in rows[0]:
            vals = [row[k] for row in rows if row[k] is not None]
            out[opt][k] = float(np.mean(vals)) if vals else None
    return out


OTHER_CPU_LIMIT = 0.10  # of the machine's CPU time, taken by other processes during the runs


def wall_clock_problems(runs, cores, seconds_default=None):
    """Why a wall-clock group may not name a winner: runs that trained outside +-5% of the
    seconds asked (train_s against study_eval.json's seconds_asked), or a machine shared with
    other processes: the share of the CPUs they took during the runs (study_eval.json's
    other_cpu, the machine's busy time minus the run's own) above OTHER_CPU_LIMIT on average, or,
    for runs that lack it, the mean 1-minute load average at the start above CORES - 0.5 (which
    also counts the study's own previous run). [] when fair."""
    reasons, loads, shares = [], [], []
    for r in runs:
        asked = r["eval"].get("seconds_asked", seconds_default)
        got = r["summary"].get("train_s")
        if asked is None or got is None:
            reasons.append(f"{r['name']}: seconds asked or trained unknown")
        elif abs(got - asked) > WALL_TOLERANCE * asked:
            reasons.append(f"{r['name']} trained {got:.2f} s of {asked:g} s asked "
                           f"({100 * (got / asked - 1):+.1f}%, outside +-5%)")
        other = r["eval"].get("other_cpu")
        start = r["eval"].get("loadavg_start")
        if other and other.get("other_share") is not None:
            shares.append(float(other["other_share"]))
        elif start:
            loads.append(float(start[0]))
    if shares and np.mean(shares) > OTHER_CPU_LIMIT:
        reasons.append(f"other processes took {100 * np.mean(shares):.1f}% of the CPUs during the "
                       f"runs on average (more than {100 * OTHER_CPU_LIMIT:.0f}%): the runs "
                       "shared the machine")
    if loads and np.mean(loads) > cores - 0.5:
        reasons.append(f"the mean 1-minute load average at the start was {np.mean(loads):.2f}, "
                       f"above {cores} cores - 0.5: the runs shared the CPUs")
    return reasons


def lr_edges(sweep_arms):
    """sweep_arms: {setting: {"axes", "mean"}}. For each family of settings that differ only by
    optim.lr (3 LRs or more): a note when its best LR is the lowest or highest one swept."""
    families = {}
    for name, a in sweep_arms.items():
        if LR not in a["axes"]:
            continue
        key = tuple(sorted((k, v) for k, v in a["axes"].items() if k not in (LR, SEED)))
        families.setdefault(key, []).append((float(a["axes"][LR]), a["mean"], name))
    notes = []
    for key, points in sorted(families.items()):
        lrs = sorted(p[0] for p in points)
        if len(lrs) < 3:
            continue
        best_lr, _, best = min(points, key=lambda p: p[1])
        side = "lowest" if best_lr == lrs[0] else "highest" if best_lr == lrs[-1] else None
        if side:
            label = ", ".join(f"{k}={v}" for k, v in key) or "all runs"
            notes.append(f"{label}: the best LR ({best_lr:g}, `{best}`) is the {side} of its "
                         f"sweep ({lrs[0]:g} .. {lrs[-1]:g}); the optimum may lie beyond it.")
    return notes


# ---- reading the study ----

def data_baselines(data_dir, split="val", cache={}):
    """ngram_baselines.baselines of DATA_DIR on SPLIT (unigram, bigram, ln V); None if unread."""
    key = (str(data_dir), split)
    if key not in cache:
        try:
            cache[key] = ngram_baselines.baselines(data_dir, split)
        except (OSError, KeyError, ValueError):
            cache[key] = None
    return cache[key]


def unigram_loss(data_dir, split="val"):
    """The SPLIT loss (nats/token) of add-one unigram counts of the train split; None if unread."""
    b = data_baselines(data_dir, split)
    return b["unigram"] if b else None


def read_run(study, entry):
    run_dir = Path(study) / "runs" / entry["name"]
    run = {"name": entry["name"], "axes": entry.get("axes", {}), "dir": run_dir,
           "phase": entry.get("phase", "sweep"), "arm": entry.get("arm"),
           "from": entry.get("from"), "wall_clock": bool(entry.get("wall_clock")),
           "status": "pending", "summary": {}, "eval": {}, "full": None, "initial": None,
           "data": None, "curve": [], "ended": None, "builds": [], "cpu": None,
           "train_losses": [], "config": {}}
    try:
        run["summary"] = json.loads((run_dir / "summary.json").read_text())
        run["status"] = run["summary"].get("status", "pending")
        # The file time is when the run ended only where it ran: a published copy (gzipped
        # metrics) checked out of git has the checkout's times.
        if (run_dir / "metrics.jsonl").is_file():
            run["ended"] = (run_dir / "summary.json").stat().st_mtime
    except (OSError, ValueError):
        return run
    if isinstance(run["summary"].get("build"), dict):
        run["builds"].append(run["summary"]["build"])
    try:
        run["eval"] = json.loads((run_dir / "study_eval.json").read_text())
        run["full"] = run["eval"]["full_val_loss"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        for rec in batch_science.read_records(run_dir):  # metrics.jsonl, or .gz when published
            if isinstance(rec.get("build"), dict):  # each start of the run records its build
                run["builds"].append(rec["build"])
            if isinstance(rec.get("backend"), dict) and run["cpu"] is None:
                run["cpu"] = rec["backend"].get("cpu")
            if "loss" in rec and "step" in rec:
                if run["initial"] is None:
                    run["initial"] = rec["loss"]
                if isinstance(rec["loss"], (int, float)):
                    run["train_losses"].append(float(rec["loss"]))
            # A diverged eval logs val_loss null: it is no point of the curve.
            if isinstance(rec.get("val_loss"), (int, float)) and "tokens" in rec:
                run["curve"].append((float(rec["tokens"]), float(rec["val_loss"])))
        cfg = tomllib.loads((run_dir / "config.toml").read_text())
        run["config"] = cfg
        run["data"] = cfg.get("data", {}).get("dir")
    except (OSError, ValueError):
        pass
    return run


def run_loss(run, full):
    """(loss, split) compared for RUN: a final's test loss where its evaluation covered the test
    split, else the full val loss; the summary's windowed val loss when not every run has a full
    evaluation."""
    if not full:
        return run["summary"].get("final_val_loss"), "val"
    if run["phase"] == "final" and run["eval"].get("split") == "test" \
            and "full_test_loss" in run["eval"]:
        return run["eval"]["full_test_loss"], "test"
    return run["full"], "val"


def arm_of(run):
    if run["phase"] == "final" and run["arm"]:
        return run["arm"]
    seed = run["axes"].get(SEED)
    name = run["name"]
    for suffix in (f"_seed{seed}", f"_train-seed{seed}"):
        if seed is not None and name.endswith(suffix):
            return name[: -len(suffix)]
    if seed is not None and name in (f"seed{seed}", f"train-seed{seed}"):
        return "all"
    return name


def arm_stats(runs_by_arm):
    arms = {}
    for arm, rs in runs_by_arm.items():
        mean, low, high = t_interval([r["loss"] for r in rs])
        tokens = np.mean([r["summary"].get("tokens", 0) for r in rs])
        params = np.mean([r["summary"].get("params", 0) for r in rs])
        arms[arm] = {"n": len(rs), "mean": mean, "low": low, "high": high,
                     "axes": {k: v for k, v in rs[0]["axes"].items() if k != SEED},
                     "wall_clock": rs[0]["wall_clock"],
                     "tokens_per_param": tokens / params if params else None,
                     "seeds": {r["axes"].get(SEED, r["name"]): r["loss"] for r in rs}}
    return arms


def read_meta(data_dir):
    try:
        return json.loads((Path(data_dir) / "meta.json").read_text())
    except (OSError, ValueError, TypeError):
        return None


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


def cpu_line(runs):
    """The CPU the runs trained on, as their first metrics record names it; the machine writing
    the report only where no run records one (it may not be the one that trained)."""
    cpus = {}
    for r in runs:
        if r["cpu"]:
            cpus[r["cpu"]] = cpus.get(r["cpu"], 0) + 1
    if not cpus:
        return f"- CPU: {machine()} (the machine writing this report: the runs record none)."
    return "- CPU (as the runs record it): " + "; ".join(
        f"{cpu} ({n} runs)" for cpu, n in sorted(cpus.items(), key=lambda kv: -kv[1])) + "."


def version():
    """The commit of the report program's checkout, and whether the program itself (scripts/)
    differs from it: the reports and results it writes into the same checkout do not count."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain",
                                "--untracked-files=no", "--", "."], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return head + (" (with uncommitted changes)" if dirty else "")


# ---- provenance: which build trained the runs (train/run/build_info.h) ----

class ProvenanceError(Exception):
    """The runs come from a build with uncommitted changes, or from several builds, and no flag
    allows it: nothing is written."""


def run_provenance(run):
    """(commits, dirty) of RUN: the commits of the builds that trained it (its summary.json and
    the first metrics.jsonl record of each start) and whether any of them had uncommitted changes
    or could not tell. No commits: the run records no build (trained before ledgerlm recorded
    one) or a build made outside git."""
    commits, dirty = set(), False
    for b in run["builds"]:
        commit = b.get("commit")
        if not commit or commit == "unknown":
            continue
        commits.add(commit)
        if b.get("dirty") is not False:
            dirty = True
    return commits, dirty


def provenance(runs):
    """dict(commits: {commit: [run names]}, dirty: [run names], unknown: [run names], mixed):
    mixed when the runs name more than one commit, or some name one and others none."""
    out = {"commits": {}, "dirty": [], "unknown": [], "runs": len(runs)}
    for r in runs:
        commits, dirty = run_provenance(r)
        if not commits:
            out["unknown"].append(r["name"])
        for c in sorted(commits):
            out["commits"].setdefault(c, []).append(r["name"])
        if dirty:
            out["dirty"].append(r["name"])
    out["mixed"] = len(out["commits"]) > 1 or (bool(out["commits"]) and bool(out["unknown"]))
    return out


def builds_text(prov):
    parts = [f"{c[:12]} ({len(names)} runs)" for c, names in sorted(prov["commits"].items())]
    if prov["unknown"]:
        parts.append(f"none recorded ({len(prov['unknown'])} runs)")
    return ", ".join(parts)


def provenance_refusal(prov, allow_dirty=False, allow_mixed=False):
    """The one-line reason the report is refused, or None."""
    if prov["dirty"] and not allow_dirty:
        return (f"study report: {len(prov['dirty'])} of {prov['runs']} runs were trained by a "
                f"build with uncommitted changes (first: {prov['dirty'][0]}): commit, rebuild "
                "and run them again, or pass --allow-dirty to write the report marked as such")
    if prov["mixed"] and not allow_mixed:
        return (f"study report: the runs were trained by different builds ({builds_text(prov)}): "
                "run them again with one build, or pass --allow-mixed-builds to write the "
                "report marked as such")
    return None


def provenance_lines(prov):
    """The banner at the top of the report (loud: a reader must not miss it) and the header's
    "Trained by" line."""
    banner = []
    if prov["dirty"]:
        banner.append(f"> **NOT A PUBLICATION OF RECORD: {len(prov['dirty'])} of {prov['runs']} "
                      "runs were trained by a build with uncommitted changes** (written with "
                      "--allow-dirty): the code that trained them is in no commit.")
    if prov["mixed"]:
        banner.append(f"> **NOT A PUBLICATION OF RECORD: the runs come from different builds** "
                      f"({builds_text(prov)}; written with --allow-mixed-builds).")
    if prov["unknown"]:
        banner.append(f"> **PROVENANCE UNKNOWN: {len(prov['unknown'])} of {prov['runs']} runs "
                      "record no build commit** (trained before ledgerlm recorded it, or by a "
                      "binary built outside git): which code trained them cannot be checked "
                      "from the runs.")
    if not prov["commits"]:
        trained = "no run records the commit of the build that trained it"
    else:
        trained = builds_text(prov) + ("; with uncommitted changes" if prov["dirty"] else
                                       "; clean builds (no uncommitted changes)")
    return banner + ([""] if banner else []), f"- Trained by: {trained}."



def baseline_lines(ax, base):
    """Dashed unigram, bigram and ln V lines (BASE: data_baselines(...) or None)."""
    if not base:
        return
    for key, label, style in (("unigram", "unigram", ":"), ("bigram", "bigram", "--"),
                              ("ln_v", "ln V (uniform)", "-.")):
        ax.axhline(base[key], color="gray", linestyle=style, linewidth=1,
                   label=f"{label} {base[key]:.3f}")


def lr_plot(study, arms, runs_by_arm, out, base=None):
    """Final val loss vs LR, one line per optimizer (and other axes), a 95% CI band."""
    series = {}
    for arm, runs in runs_by_arm.items():
        axes = runs[0]["axes"]
        if LR not in axes:
            continue
        label = ", ".join(f"{k}={v}" for k, v in sorted(axes.items())
                          if k not in (LR, SEED)) or "runs"
        series.setdefault(label, []).append((float(axes[LR]), arms[arm]))
    if not series:
        return None
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for label, points in sorted(series.items()):
        points.sort(key=lambda p: p[0])
        lrs = [p[0] for p in points]
        means = [p[1]["mean"] for p in points]
        ax.plot(lrs, means, marker="o", label=label)
        lo = [p[1]["low"] if p[1]["low"] is not None else p[1]["mean"] for p in points]
        hi = [p[1]["high"] if p[1]["high"] is not None else p[1]["mean"] for p in points]
        ax.fill_between(lrs, lo, hi, alpha=0.2)
    baseline_lines(ax, base)
    ax.set_xscale("log")
    ax.set_xlabel("LR (optim.lr)")
    ax.set_ylabel("final val loss (mean, 95% CI over seeds)")
    ax.set_title(f"LR sensitivity: {study}", fontsize=9)
    ax.legend(fontsize=7)
    return figures.save_figure(fig, out)


def value_order(v):
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def heatmap_grid(arms, kx, ky):
    """(x values, y values, grid[y][x]): the lowest mean of the arms at each (kx, ky) pair, NaN
    where none ran."""
    xs = sorted({a["axes"].get(kx) for a in arms}, key=value_order)
    ys = sorted({a["axes"].get(ky) for a in arms}, key=value_order)
    grid = np.full((len(ys), len(xs)), np.nan)
    for a in arms:
        x, y = xs.index(a["axes"].get(kx)), ys.index(a["axes"].get(ky))
        if not a["mean"] >= grid[y, x]:  # NaN (empty) or a better value
            grid[y, x] = a["mean"]
    return xs, ys, grid


def heatmaps(study, sweep_arms, out_dir):
    """Per optimizer and per pair of its swept axes (other than the seed): a PNG of the mean
    final val loss over the pair's values, the best over any other swept axis. [(png, caption)]."""
    by_opt = {}
    for a in sweep_arms.values():
        by_opt.setdefault(a["axes"].get(OPTIM, "all"), []).append(a)
    out = []
    for opt, arms in sorted(by_opt.items()):
        swept = sorted(k for k in {k for a in arms for k in a["axes"]}
                       if k not in (SEED, OPTIM) and len({a["axes"].get(k) for a in arms}) > 1)
        for i, kx in enumerate(swept):
            for ky in swept[i + 1:]:
                xs, ys, grid = heatmap_grid(arms, kx, ky)
                name = ngram_safe(f"heatmap_{opt}_{kx}_{ky}.png")
                plt = figures.pyplot()
                fig, ax = plt.subplots(figsize=(1.2 * len(xs) + 2.5, 0.6 * len(ys) + 2), dpi=100)
                im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
                for (y, x), v in np.ndenumerate(grid):
                    if np.isfinite(v):
                        ax.text(x, y, f"{v:.3f}", ha="center", va="center", fontsize=7,
                                color="white")
                ax.set_xticks(range(len(xs)), [str(v) for v in xs], fontsize=7)
                ax.set_yticks(range(len(ys)), [str(v) for v in ys], fontsize=7)
                ax.set_xlabel(kx)
                ax.set_ylabel(ky)
                ax.set_title(f"{study}: {opt}, mean final val loss", fontsize=9)
                fig.colorbar(im, ax=ax)
                figures.save_figure(fig, out_dir / name)
                others = [k for k in swept if k not in (kx, ky)]
                out.append((name, f"{opt}: {kx} x {ky}" +
                            (f" (best over {', '.join(others)})" if others else "")))
    return out


def ngram_safe(name):
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in name)


def curves_plot(study, groups, curves, out, base=None):
    """The finals' mean eval curve per arm (val loss vs tokens), one panel per group."""
    keys = [k for k in groups if any(curves.get(a, ([], []))[0] for a in groups[k]["arms"])]
    if not keys:
        return None
    plt = figures.pyplot()
    fig, axs = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5), dpi=100, squeeze=False)
    for ax, key in zip(axs[0], keys):
        for arm in groups[key]["arms"]:
            tokens, losses = curves.get(arm, ([], []))
            if tokens:
                ax.plot(tokens, losses, marker=".", label=arm)
        baseline_lines(ax, base)
        ax.set_xlabel("tokens")
        ax.set_ylabel("val loss (eval windows, mean over seeds)")
        ax.set_title(f"{study}: {group_label(key)}", fontsize=9)
        ax.legend(fontsize=7)
    return figures.save_figure(fig, out)


# ---- the report ----

def compare(arms, baseline, alpha=ALPHA):
    """The paired comparisons of every arm of ARMS against BASELINE, Holm over the testable
    ones: ({arm: paired_difference plus p_holm, corr_low, corr_high, level}, winner or None)."""
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
    return comps, verdict(testable, baseline, alpha)


def arms_table(arms, loss_label="mean final val loss", failures=None):
    """FAILURES: {arm: (runs kept out, runs)} adds the failure rate with its exact 95% interval."""
    extra = " failed (95% Clopper-Pearson) |" if failures is not None else ""
    lines = [f"| arm | n | {loss_label} | 95% CI | tokens per parameter |{extra}",
             "|---|---|---|---|---|" + ("---|" if extra else "")]
    for arm, a in sorted(arms.items(), key=lambda kv: kv[1]["mean"]):
        ci = f"[{fmt(a['low'])}, {fmt(a['high'])}]" if a["low"] is not None else "(n < 2)"
        rate = f" {seed_stats.rate_text(*failures.get(arm, (0, 0)))} |" if extra else ""
        lines.append(f"| {arm} | {a['n']} | {fmt(a['mean'])} | {ci} | "
                     f"{fmt(a['tokens_per_param'], 2)} |{rate}")
    return lines + [""]


def kept_out(run):
    return run["flag"] != "ok"


def diverged(run):
    return run["status"] == "failed"


def failure_counts(runs, key, failed=kept_out):
    """{KEY(run): (runs FAILED says failed, runs)} over RUNS that finished or failed."""
    out = {}
    for r in runs:
        k, n = out.get(key(r), (0, 0))
        out[key(r)] = (k + bool(failed(r)), n + 1)
    return out


def failure_lines(runs, what, failed=kept_out):
    """The failure rate per optimizer over RUNS with its exact 95% interval (at 3 seeds, 0
    failures still allows a rate up to 71%). FAILED: kept_out (failed, unstable or no better than
    the unigram: the runs the loss statistics leave out) or diverged (status failed: a
    steps-to-target study keeps every other run)."""
    counts = failure_counts(runs, lambda r: r["axes"].get(OPTIM, "-"), failed)
    if not counts:
        return []
    definition = ("Runs kept out of the loss statistics (failed, unstable, or no better than the "
                  "unigram floor)" if failed is kept_out else "Runs that failed (diverged)")
    lines = [f"## Failure rate per optimizer ({what})", "",
             f"{definition} over the runs that ended; interval: exact binomial "
             "(Clopper-Pearson), 95%. A run that ends high after a loss spike but below those "
             "bars is not counted.", "",
             "| optimizer | failed / runs (rate, 95% CI) |", "|---|---|"]
    lines += [f"| {opt} | {seed_stats.rate_text(k, n)} |" for opt, (k, n) in sorted(counts.items())]
    return lines + [""]


def comparison_lines(arms, baseline, alpha, veto=()):
    """The paired table against BASELINE and the verdict; VETO: reasons that forbid a winner."""
    comps, winner = compare(arms, baseline, alpha)
    testable = [c for c in comps.values() if c.get("p") is not None]
    pairs = min((c["n"] for c in testable), default=0)
    effect = seed_stats.detectable_effect(pairs, len(testable), alpha)
    power = ([f"Power: with {pairs} pairs and Holm over {len(testable)} comparisons, the "
              f"first-ranked comparison is significant only when its mean difference exceeds "
              f"{effect:.1f} standard deviations of its paired differences (t({pairs - 1}) at "
              f"{100 * (1 - alpha / len(testable)):.2f}%); \"no winner\" at this n is weak "
              "evidence that the arms do not differ.", ""] if effect is not None else [])
    lines = [f"Paired by seed: arm minus `{baseline}` (negative: lower loss than the baseline).",
             "", "| arm | pairs | mean difference | 95% CI | p | p (Holm) | corrected CI |",
             "|---|---|---|---|---|---|---|"]
    for a, c in comps.items():
        ci = f"[{fmt(c['low'])}, {fmt(c['high'])}]" if c["low"] is not None else "(n < 2)"
        corr = (f"[{fmt(c['corr_low'])}, {fmt(c['corr_high'])}] at "
                f"{100 * c['level']:.2f}%" if "corr_low" in c else "-")
        lines.append(f"| {a} | {c['n']} | {fmt(c['mean'])} | {ci} | {fmt(c['p'], 3)} | "
                     f"{fmt(c.get('p_holm'), 3)} | {corr} |")
    if veto:
        lines += ["", f"**No winner named** (the statistics would say: "
                  f"{'Winner: ' + winner if winner else 'no winner at this n'}), because:", ""]
        lines += [f"- {why}" for why in veto]
        return lines + [""] + power, None
    return lines + ["", f"**Winner: {winner}**" if winner else "**No winner at this n**", ""] + \
        ([] if winner else power), winner


def header_lines(study, manifest, done, reported_split):
    """Run time, budgets (tokens per parameter, epochs), the splits and the n-gram floors."""
    lines = []
    walls = [r["summary"]["wall_s"] for r in done if r["summary"].get("wall_s") is not None]
    if walls:
        span = ""
        ends = [(r["ended"], r["summary"]["wall_s"]) for r in done
                if r["ended"] is not None and r["summary"].get("wall_s") is not None]
        if ends:
            first = min(e - w for e, w in ends)
            span = (f", span {max(e for e, _ in ends) - first:.1f} s (first start to last end, "
                    f"from the summaries' file times)")
        else:
            span = (" (no span: the file times of a published copy are not when the runs "
                    "ran)")
        lines.append(f"- Runs: {len(walls)} x {np.mean(walls):.1f} s mean wall time per run; "
                     f"total {sum(walls):.1f} s of run wall time{span}.")
    datas = sorted({r["data"] for r in done if r["data"]})
    for d in datas:
        meta = read_meta(d)
        if not meta:
            lines.append(f"- Data {d}: meta.json not readable (no split description or "
                         f"baselines).")
            continue
        split_text = (f"val = the last {100 * meta.get('val_fraction', 0):g}% of each document "
                      f"({meta.get('val', {}).get('tokens', '?')} tokens)")
        if "test" in meta:
            split_text += (f"; test = {100 * meta.get('test_fraction', 0):g}% of each document, "
                           f"held out of train as val is ({meta['test'].get('tokens', '?')} "
                           "tokens)")
        lines.append(f"- Data {d} (vocab {meta.get('vocab_size')}, "
                     f"{meta.get('train', {}).get('tokens', '?')} train tokens): {split_text}.")
        b = data_baselines(d, reported_split)
        if b:
            lines.append(f"- Floors on the {reported_split} split (counted on train): unigram "
                         f"{b['unigram']:.4f}, bigram {b['bigram']:.4f} (smoothed towards the "
                         f"unigram, prior weight {b['alpha']:g} chosen on train's last 10%, 1 "
                         f"when that tail is too short), "
                         f"ln V {b['ln_v']:.4f} nats/token.")
    budgets = {}
    for r in done:
        if r["status"] != "finished":
            continue
        if r["wall_clock"]:
            budget = f"wall clock {r['eval'].get('seconds_asked', '?')} s"
        else:
            budget = f"train.max_tokens = {r['axes']['train.max_tokens']}" \
                if "train.max_tokens" in r["axes"] else "as configured"
        budgets.setdefault((r["phase"], budget), []).append(r)
    if budgets:
        lines += ["", "| phase | budget | runs | tokens (mean) | params | tokens per parameter | "
                  "epochs |", "|---|---|---|---|---|---|---|"]
        for (phase, budget), rs in sorted(budgets.items(),
                                          key=lambda kv: (kv[0][0], value_order(
                                              kv[0][1].rsplit(" ", 1)[-1]), kv[0][1])):
            tokens = float(np.mean([r["summary"].get("tokens", 0) for r in rs]))
            params = float(np.mean([r["summary"].get("params", 0) for r in rs]))
            meta = read_meta(rs[0]["data"]) if rs[0]["data"] else None
            train_tokens = (meta or {}).get("train", {}).get("tokens")
            lines.append(f"| {phase} | {budget} | {len(rs)} | {tokens:.0f} | {params:.0f} | "
                         f"{fmt(tokens / params if params else None, 2)} | "
                         f"{fmt(tokens / train_tokens if train_tokens else None, 3)} |")
    return lines + [""]


def selection_lines(manifest, sweep_arms, study, base, runs_by_arm):
    """The LR plot, the chosen settings, LR-edge notes and heatmaps of the sweep."""
    lines = []
    name = manifest.get("name", study.name)
    png = lr_plot(name, sweep_arms, runs_by_arm, study / "lr_sensitivity.png", base)
    if png:
        lines += ["## LR sensitivity", "", f"![final val loss vs LR]({png})", "",
                  "Runs kept out are not drawn: an LR whose runs all failed has no "
                  "point. Grey lines: the unigram, bigram and ln V floors of the val split.", ""]
    finals = manifest.get("finals")
    if finals and finals.get("arms"):
        lines += ["## Selection", "", "Each arm's setting: the lowest seed-median full-val loss of "
                  "the sweep over its select axes (" + ", ".join(finals.get("select", [])) +
                  "). Selection loss as the plan recorded it; the mean of that setting's kept "
                  "sweep runs here beside it.", "",
                  "| arm | chosen setting | selection loss | sweep mean here (n) | settings "
                  "compared |", "|---|---|---|---|---|"]
        for arm, a in sorted(finals["arms"].items()):
            here = sweep_arms.get(a.get("from"))
            lines.append(f"| {arm} | {a.get('from')} | {fmt(a.get('selection_loss'))} | "
                         f"{fmt(here['mean']) + ' (' + str(here['n']) + ')' if here else '-'} | "
                         f"{a.get('settings', '-')} |")
        lines.append("")
    edges = lr_edges(sweep_arms)
    if edges:
        lines += ["LR at the edge of its sweep:", ""] + [f"- {e}" for e in edges] + [""]
    maps = heatmaps(name, sweep_arms, study)
    if maps:
        lines += ["## Heatmaps", "", "Mean final val loss of each setting over its seeds."]
        for png, caption in maps:
            lines += ["", f"{caption}:", "", f"![{caption}]({png})"]
        lines.append("")
    return lines


def finals_lines(manifest, final_runs, final_arms, study, alpha, cores, base, split):
    finals = manifest["finals"]
    groups = finals_groups(final_arms, finals.get("select", []), manifest.get("baseline"))
    lines = ["## Finals", "",
             f"Each arm's chosen setting retrained on seeds {finals.get('seeds')}, compared on "
             f"the full {split} split. Baseline: optim.name = `{manifest.get('baseline')}` "
             "within each group of arms that share the select axes other than optim.name.", ""]
    curves, seed_curves = {}, {}
    for arm in final_arms:
        seed_curves[arm] = [r["curve"] for r in final_runs if r["arm"] == arm]
        curves[arm] = mean_curve(seed_curves[arm])
    failures = failure_counts(final_runs, lambda r: r["arm"])
    for key, g in groups.items():
        arms = {a: final_arms[a] for a in g["arms"]}
        lines += [f"### {group_label(key)}", ""] + arms_table(arms, f"mean final {split} loss",
                                                              failures)
        veto = ()
        if key == ("wall clock",):
            wall_runs = [r for r in final_runs if r["wall_clock"] and r["status"] == "finished"]
            lines += ["| run | seconds asked | trained (train_s) | off by | other processes' "
                      "share of the CPUs | load 1/5/15 min at start | at end |",
                      "|---|---|---|---|---|---|---|"]
            for r in wall_runs:
                asked = r["eval"].get("seconds_asked", finals.get("wall_clock_seconds"))
                got = r["summary"].get("train_s")
                off = f"{100 * (got / asked - 1):+.1f}%" if asked and got is not None else "-"
                load = lambda k: "/".join(f"{x:.2f}" for x in r["eval"][k]) \
                    if r["eval"].get(k) else "-"  # noqa: E731
                other = (r["eval"].get("other_cpu") or {}).get("other_share")
                share = f"{100 * other:.1f}%" if other is not None else "-"
                lines.append(f"| {r['name']} | {fmt(asked, 2)} | {fmt(got, 2)} | {off} | {share} | "
                             f"{load('loadavg_start')} | {load('loadavg_end')} |")
            lines.append("")
            veto = wall_clock_problems(wall_runs, cores, finals.get("wall_clock_seconds"))
        if not g["baseline"]:
            lines += [f"No arm of this group has optim.name = `{manifest.get('baseline')}` with "
                      "kept runs: no comparisons.", ""]
            continue
        more, _ = comparison_lines(arms, g["baseline"], alpha, veto)
        lines += more
        lines += speedup_lines(g, seed_curves)
    lines += data_equivalent.report_lines(study, final_arms, finals.get("select", []),
                                          manifest.get("baseline"), split,
                                          manifest.get("name", study.name))
    png = curves_plot(manifest.get("name", study.name), groups, curves,
                      study / "finals_val_curves.png", base)
    if png:
        lines += ["### Val loss vs tokens", "", f"![finals val loss vs tokens]({png})", "",
                  "Mean over seeds of the eval lines of metrics.jsonl (train.eval_windows "
                  "windows of val, not the whole split). Grey lines: unigram, bigram, ln V of "
                  "val.", ""]
    costs = cost_rows(final_runs)
    if costs:
        lines += ["## Cost per optimizer (finals)", "",
                  "| optimizer | runs | optimizer ms/step | step ms | optimizer share | "
                  "optimizer state bytes/param | peak tracked memory (bytes) | checkpoint bytes | "
                  "weights bytes | tokens/s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for opt, c in costs.items():
            share = "-" if c["share"] is None else f"{100 * c['share']:.1f}%"
            lines.append(f"| {opt} | {c['runs']} | {fmt(c['optim_ms'], 3)} | "
                         f"{fmt(c['step_ms'], 3)} | {share} | {fmt(c['state_per_param'], 2)} | "
                         f"{fmt(c['peak'], 0)} | {fmt(c['ckpt'], 0)} | {fmt(c['weights'], 0)} | "
                         f"{fmt(c['tokens_per_s'], 0)} |")
        lines.append("")
    return lines


def speedup_lines(group, seed_curves):
    """Tokens to target against the baseline's median seed (seed_stats.median_seed_speedup) with
    bootstrap intervals, for the arms of one finals group."""
    base = seed_curves.get(group["baseline"], [])
    point = seed_stats.median_seed_speedup(base, base) if base else None
    if not point:
        return []
    lines = [f"Tokens to target: target = the final eval-window val loss of "
             f"`{group['baseline']}`'s median seed (the seed with the median final loss), "
             f"{point['target']:.4f}, which "
             f"that seed first reaches at {point['base_tokens']:.0f} tokens; each arm's tokens: "
             "the median over its seeds of the tokens at which each seed's eval curve first "
             "reaches it (linear between eval points; a seed that never does counts as never); "
             "speedup = the baseline's tokens / the arm's. Interval: "
             f"{seed_stats.SPEEDUP_RESAMPLES} bootstrap resamples (fixed seed) of both arms' "
             "seeds, the median seed and its target re-chosen in each, a resample in which the "
             "arm does not reach the target counting as speedup 0; 95% percentile (with 3 seeds "
             "a coarse interval: a resample has only 10 distinct seed multisets per arm).", "",
             "| arm | seeds reaching it | tokens to target (median over seeds) | speedup | "
             "95% CI |",
             "|---|---|---|---|---|"]
    for a in group["arms"]:
        curves = [c for c in seed_curves.get(a, []) if c]
        sp = seed_stats.median_seed_speedup(base, curves)
        if sp is None:
            lines.append(f"| {a} | - | - | - | - |")
            continue
        n_reach = sum(seed_stats.tokens_to_target(c, point["target"]) is not None for c in curves)
        if a == group["baseline"]:
            lines.append(f"| {a} | {n_reach}/{len(curves)} | {point['base_tokens']:.0f} | 1.00x "
                         "(reference) | - |")
            continue
        low, high = seed_stats.bootstrap_speedup(base, curves)
        ci = "-" if low is None or high == 0 else f"[{low:.2f}x, {high:.2f}x]"
        tokens = "not reached" if sp["arm_tokens"] is None else f"{sp['arm_tokens']:.0f}"
        speed = "-" if sp["arm_tokens"] is None else f"{sp['speedup']:.2f}x"
        lines.append(f"| {a} | {n_reach}/{len(curves)} | {tokens} | {speed} | {ci} |")
    return lines + [""]


def report(study_dir, alpha=ALPHA, cores=None, allow_dirty=False, allow_mixed=False):
    cores = cores or os.cpu_count()
    study = Path(study_dir)
    manifest = json.loads((study / "manifest.json").read_text())
    runs = [read_run(study, e) for e in manifest["runs"]]
    done = [r for r in runs if r["status"] in ("finished", "failed")]
    prov = provenance(done)
    refused = provenance_refusal(prov, allow_dirty, allow_mixed)
    if refused:  # before anything is written
        raise ProvenanceError(refused)
    banner, trained = provenance_lines(prov)
    full = bool(done) and all(r["full"] is not None for r in done if r["status"] == "finished")
    for r in done:
        r["loss"], r["split"] = run_loss(r, full)
        unigram = unigram_loss(r["data"], r["split"]) if r["data"] else None
        r["unigram"] = unigram
        r["flag"] = classify(r["status"], r["initial"], r["loss"], unigram)
    good = [r for r in done if r["flag"] == "ok"]
    finals = manifest.get("finals")
    runs_by_arm, final_by_arm = {}, {}
    for r in good:
        (final_by_arm if r["phase"] == "final" else runs_by_arm).setdefault(arm_of(r), []).append(r)
    arms, final_arms = arm_stats(runs_by_arm), arm_stats(final_by_arm)
    split = "val"
    if finals:
        split = finals.get("split") if finals.get("split") in ("val", "test") else \
            next((r["split"] for r in done if r["phase"] == "final"), "val")
        if not full:
            split = "val"
    data = next((r["data"] for r in done if r["data"]), None)

    steps_objective = manifest.get("objective") == "steps_to_target"
    lines = [f"# Study {manifest.get('name', study.name)}", ""] + banner + [
             f"- Written by scripts/study_report.py (`ledgerlm study report {study_dir}`) from "
             f"{len(done)} of {len(manifest['runs'])} planned runs (" +
             (f"{sum(r['status'] == 'failed' for r in done)} failed)." if steps_objective else
              f"{len(good)} kept)."),
             f"- Study file: {manifest.get('study')}; base config: "
             f"{manifest.get('config') or '(none: [base] keys only)'}.",
             trained,
             f"- Report program: scripts/study_report.py at commit {version()}.",
             cpu_line(done),
             ("- Compared: the steps (and tokens) to the study's target_loss on the in-run "
              "evals (train.eval_windows val windows; runs/NAME/study_eval.json "
              "steps_to_target); final losses below are context." if steps_objective else
              f"- Loss compared: the final loss over the whole split (`ledgerlm eval`, "
              f"runs/NAME/study_eval.json): val for the sweep, which selects, {split} for the "
              f"finals, which are reported." if full and finals else
              "- Loss compared: the final val loss over the whole val split (`ledgerlm eval`, "
              "runs/NAME/study_eval.json)." if full else
              "- Loss compared: the summary's final val loss, over train.eval_windows val "
              "windows only (not the whole split: some runs have no study_eval.json; "
              "`ledgerlm study run` writes it)."),
             f"- Intervals: 95% Student t over seeds; comparisons Holm-corrected at alpha = "
             f"{alpha}."]
    lines += header_lines(study, manifest, done, split)
    if split_equivalence.is_split_study(manifest):  # one global batch, split several ways
        lines += split_equivalence.equivalence_lines(study, manifest, manifest.get("baseline"))
    val_floors = data_baselines(data, "val") if data else None
    # (Its figures, LR sensitivity and heatmaps of final loss, are not drawn for steps to target.)
    selection = [] if steps_objective else selection_lines(manifest, arms, study, val_floors,
                                                           runs_by_arm)
    if steps_objective:  # batch-size science: steps to a target, not final losses
        lines += batch_science.report_lines(study, manifest, val_floors)
        lines += batch_science.selection_lines(manifest)
        lines += failure_lines(done, "sweep and finals", diverged)
    elif finals:
        lines += ["## Sweep settings", ""] + arms_table(arms) + selection
        lines += failure_lines([r for r in done if r["phase"] != "final"], "sweep")
    else:
        lines += ["## Arms", ""] + arms_table(arms)
        baseline = manifest.get("baseline")
        lines += ["## Against the baseline", ""]
        if not baseline:
            lines += ["No baseline arm named (`baseline = \"ARM\"` in the study file): no "
                      "comparisons.", ""]
        elif baseline not in arms:
            lines += [f"The baseline arm `{baseline}` has no kept runs (arms: "
                      f"{', '.join(sorted(arms)) or 'none'}): no comparisons.", ""]
        else:
            lines += comparison_lines(arms, baseline, alpha)[0]
    if not steps_objective:
        lines += robustness_lines(done, manifest, alpha)

    if finals and not steps_objective:
        lines += finals_lines(manifest, [r for r in done if r["phase"] == "final"], final_arms,
                              study, alpha, cores, val_floors, split)

    flagged = [r for r in done if r["flag"] != "ok"]
    if steps_objective:
        # Steps to target keeps every run: one that missed the target is a result (it never
        # reaches it) in the tables above; only the failed ones are listed.
        flagged = [r for r in done if r["status"] == "failed"]
        lines += ["## Runs that failed", ""]
    else:
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

    if not finals and not steps_objective:
        lines += selection
    lines += ["## Runs", "", "| run | status | steps | tokens | params | final loss | split |",
              "|---|---|---|---|---|---|---|"]
    for r in done:
        s = r["summary"]
        lines.append(f"| {r['name']} | {r['status']} | {s.get('steps', '-')} | "
                     f"{s.get('tokens', '-')} | {s.get('params', '-')} | {fmt(r['loss'])} | "
                     f"{r['split']} |")
    (study / "REPORT.md").write_text("\n".join(lines) + "\n")
    return study / "REPORT.md"


def robustness_lines(done, manifest, alpha):
    """The sweep's settings over their seeds (seed_robustness.py), where some setting has
    enough seeds for a median and a spike rate to mean something."""
    by_setting = {}
    for r in done:
        if r["phase"] == "final":
            continue
        by_setting.setdefault(arm_of(r), []).append(
            {"loss": r["loss"] if r["status"] == "finished" else None, "kept": r["flag"] == "ok",
             "train_losses": r["train_losses"], "seed": r["axes"].get(SEED, r["name"]),
             "config": r["config"]})
    if not seed_robustness.applies(by_setting):
        return []
    base = manifest.get("baseline")
    base_optim = next((rs[0]["config"].get("optim", {}).get("name")
                       for arm, rs in by_setting.items() if arm == base), base)
    return seed_robustness.report_lines(by_setting, base_optim, alpha)


def publish(study_dir, out_dir):
    """Copies the report, its PNGs, the manifest and each run's small files (summary.json,
    config.toml, study_eval.json, metrics.jsonl gzipped; no weights or checkpoints) into OUT_DIR,
    replacing what a previous publication put there."""
    import gzip
    import shutil
    study, out = Path(study_dir), Path(out_dir)
    if out.exists():
        if not (out / "manifest.json").is_file() and any(out.iterdir()):
            sys.exit(f"study_report: error: --publish {out}: not empty and not a published study "
                     "(no manifest.json): refusing to replace it")
        shutil.rmtree(out)
    (out / "runs").mkdir(parents=True)
    for f in [study / "REPORT.md", study / "manifest.json", *sorted(study.glob("*.png"))]:
        shutil.copy2(f, out / f.name)
    for run in sorted(p for p in (study / "runs").iterdir() if p.is_dir()):
        dest = out / "runs" / run.name
        dest.mkdir()
        for name in ("summary.json", "config.toml", "study_eval.json"):
            if (run / name).is_file():
                shutil.copy2(run / name, dest / name)
        if (run / "metrics.jsonl").is_file():
            with open(run / "metrics.jsonl", "rb") as src, gzip.GzipFile(dest / "metrics.jsonl.gz",
                                                                           "wb", mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--alpha", type=float, default=ALPHA)
    ap.add_argument("--allow-dirty", action="store_true",
                    help="write the report even if runs were trained by a build with "
                         "uncommitted changes (marked so at its top)")
    ap.add_argument("--allow-mixed-builds", action="store_true",
                    help="write the report even if the runs come from different builds "
                         "(marked so at its top)")
    ap.add_argument("--publish", metavar="OUT",
                    help="then copy the report, PNGs, manifest and each run's summary, config, "
                         "evaluation and gzipped metrics (no weights) into OUT")
    args = ap.parse_args()
    if not (Path(args.dir) / "manifest.json").is_file():
        sys.exit(f"study_report: error: {args.dir}/manifest.json not found (ledgerlm study plan)")
    try:
        path = report(args.dir, args.alpha, allow_dirty=args.allow_dirty,
                      allow_mixed=args.allow_mixed_builds)
    except ProvenanceError as e:
        print(f"ledgerlm: error: {e}", file=sys.stderr)
        return 1
    print(f"study report: {path}")
    if args.publish:
        print(f"study report: published to {publish(args.dir, args.publish)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
