#!/usr/bin/python3
"""Batch-size science for a study whose manifest has "objective": "steps_to_target": the steps
and tokens each global batch G needs to reach the study's target loss, the fit of McCandlish et
al.'s (2018, "An Empirical Model of Large-Batch Training") trade-off S(G) = Smin + Emin / G with
the critical batch B_crit = Emin / Smin, how the fixed, linear and square-root LR rules predict
the per-G best LR, the optimizer arms at the largest G, and B_simple (train.gns) against tokens.

G is counted in sequences: world x train.micro_batch x train.accum; tokens per step = G x
train.seq_len. scripts/study_report.py calls report_lines() for such a study; the pure functions
above it are checked by tests/tools/test_batch_science.py on synthetic data. B_crit and B_simple
as functions of the target loss, the latter from window means of the raw per-step estimates:
scripts/bcrit_targets.py.
"""
import gzip
import json
import math
import tomllib
from pathlib import Path

import numpy as np
from scipy import optimize, stats

import bcrit_targets
import figures

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20180614  # fixed: the same runs give the same interval every time
DEFAULTS = {"train.micro_batch": 8, "train.accum": 1, "train.seq_len": 128}  # run_config.h


# ---- pure functions ----

def steps_to_target(records, target):
    """The step at which the eval curve first reaches TARGET: the first eval (s1, l1) with
    l1 <= target; if an earlier eval (s0, l0) exists, s = s0 + (s1 - s0) * (l0 - target) /
    (l0 - l1), else s = s1; None when never reached. RECORDS: metrics.jsonl records; those with
    "step" and "val_loss" are the evals (the C++ engine uses exactly this formula)."""
    prev = None
    for rec in records:
        if "step" not in rec or rec.get("val_loss") is None:
            continue
        s1, l1 = float(rec["step"]), float(rec["val_loss"])
        if not math.isfinite(l1):
            continue
        if l1 <= target:
            if prev is None:
                return s1
            s0, l0 = prev
            return s0 + (s1 - s0) * (l0 - target) / (l0 - l1)
        prev = (s1, l1)
    return None


def t_interval(xs, confidence=0.95):
    """(mean, low, high): the Student t interval; low/high None below 2 values."""
    xs = np.asarray(xs, dtype=float)
    mean = float(xs.mean())
    if xs.size < 2:
        return mean, None, None
    half = stats.t.ppf(0.5 + confidence / 2, xs.size - 1) * xs.std(ddof=1) / math.sqrt(xs.size)
    return mean, mean - half, mean + half


def best_lr(steps_by_lr):
    """steps_by_lr: {lr: [steps per seed, None where the target was not reached]}. The LR with
    the fewest mean steps among those whose every seed reached the target (ties: the lower LR),
    and its mean; (None, None) when none did."""
    reached = [(float(np.mean(s)), lr) for lr, s in steps_by_lr.items()
               if s and all(x is not None for x in s)]
    if not reached:
        return None, None
    mean, lr = min(reached)  # tuples: equal means fall to the lower LR
    return lr, mean


def scaling_curve(g, smin, emin):
    """McCandlish et al.'s S(G) = Smin + Emin / G, i.e. (S/Smin - 1)(E/Emin - 1) = 1, E = G S."""
    return smin + emin / np.asarray(g, dtype=float)


def fit_scaling(gs, steps):
    """Least squares of log S against log(Smin + Emin / G) (relative errors), Smin, Emin > 0.
    (Smin, Emin). Started from the linear fit of relative errors, which it refines."""
    g, s = np.asarray(gs, dtype=float), np.asarray(steps, dtype=float)
    a = np.stack([1.0 / s, 1.0 / (g * s)], axis=1)  # (Smin + Emin/G) / S = 1, relative rows
    start, _ = optimize.nnls(a, np.ones_like(s))
    floor = 1e-9 * float(s.min())
    start = np.maximum(start, [floor, floor * float(g.min())])

    def residual(p):
        return np.log(scaling_curve(g, p[0], p[1])) - np.log(s)

    def jacobian(p):  # d log f / d(Smin, Emin) = (1/f, 1/(G f))
        f = scaling_curve(g, p[0], p[1])
        return np.stack([1.0 / f, 1.0 / (g * f)], axis=1)

    res = optimize.least_squares(residual, start, jac=jacobian,
                                 bounds=([floor, floor * float(g.min())], [np.inf, np.inf]),
                                 x_scale=start, xtol=1e-12, ftol=1e-12)
    return float(res.x[0]), float(res.x[1])


def fit_scaling_many(gs, steps, iterations=200):
    """fit_scaling of every row of STEPS (R x len(GS)) at once: (Smin, Emin) arrays of R. The same
    problem (least squares in log S, Smin, Emin above fit_scaling's floors) solved by a
    Levenberg-Marquardt iteration vectorized over the rows, a coordinate held at its floor while
    the gradient pushes it below (an active set). Why: a bootstrap refits thousands of ladders of
    the same Gs, and one scipy call per ladder made the report of a study take minutes."""
    g = np.asarray(gs, dtype=float)
    s = np.asarray(steps, dtype=float).reshape(-1, g.size)
    log_s = np.log(s)
    floor = np.stack([1e-9 * s.min(axis=1), 1e-9 * s.min(axis=1) * g.min()], axis=1)
    # Start: the linear fit of relative errors, (Smin + Emin / G) / S = 1, clamped to the floors.
    a = np.stack([1.0 / s, 1.0 / (g * s)], axis=2)                   # R x n x 2
    ata = np.einsum("rni,rnj->rij", a, a)
    atb = a.sum(axis=1)
    p = np.maximum(np.linalg.solve(ata + 1e-300 * np.eye(2), atb[..., None])[..., 0], floor)

    def cost_of(p):
        f = p[:, :1] + p[:, 1:] / g
        return np.square(np.log(f) - log_s).sum(axis=1)

    cost = cost_of(p)
    lam = np.full(len(p), 1e-3)
    eye = np.eye(2)
    for _ in range(iterations):
        f = p[:, :1] + p[:, 1:] / g
        r = np.log(f) - log_s                                           # R x n
        j = np.stack([1.0 / f, 1.0 / (g * f)], axis=2)                  # R x n x 2
        jtj = np.einsum("rni,rnj->rij", j, j)
        grad = np.einsum("rni,rn->ri", j, r)
        # A coordinate at its floor whose descent direction points below it stays there.
        active = (p <= floor * (1 + 1e-12)) & (grad > 0)
        keep = ~active
        sys_ = jtj * (1 + lam[:, None, None] * eye)
        sys_ = sys_ * keep[:, :, None] * keep[:, None, :] + eye * active[:, :, None]
        rhs = np.where(keep, grad, 0.0)
        step = -np.linalg.solve(sys_, rhs[..., None])[..., 0]
        trial = np.maximum(p + step, floor)
        new_cost = cost_of(trial)
        better = new_cost < cost
        moved = np.abs(trial - p) > 1e-13 * np.abs(p)
        p = np.where(better[:, None], trial, p)
        lam = np.where(better, lam / 3, np.minimum(lam * 3, 1e12))
        cost = np.where(better, new_cost, cost)
        # A row converged rejects every step, so its damping climbs; stop when all have.
        if np.all(lam >= 1e10) and not (better & moved.any(axis=1)).any():
            break
    return p[:, 0], p[:, 1]


def b_crit_verdict(bcrit, g_min, g_max):
    """Whether the ladder of Gs tried resolves B_crit: ("value", B) when G_min <= B <= G_max;
    ("above", G_max) when S still falls about as 1/G at the largest G (Smin not resolved,
    B_crit > G_max); ("below", G_min) when S is already flat at the smallest G."""
    if not math.isfinite(bcrit) or bcrit > g_max:
        return "above", g_max
    if bcrit < g_min:
        return "below", g_min
    return "value", bcrit


def bootstrap_bcrit(gs, samples, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """95% percentile interval of B_crit. SAMPLES: per G the steps of each final seed (resampled
    within each G), or per G one value (then a residual bootstrap: the fit's log residuals
    resampled onto the fitted curve). (low, high) or (None, None) below 2 Gs."""
    gs = np.asarray(gs, dtype=float)
    if gs.size < 2:
        return None, None
    rng = np.random.default_rng(seed)
    means = np.array([np.mean(x) for x in samples])
    per_seed = all(len(x) >= 2 for x in samples)
    if not per_seed:
        smin, emin = fit_scaling(gs, means)
        fitted = np.log(scaling_curve(gs, smin, emin))
        resid = np.log(means) - fitted
    rows = []
    for _ in range(resamples):
        if per_seed:
            rows.append([np.mean(rng.choice(np.asarray(x, dtype=float), len(x)))
                         for x in samples])
        else:
            rows.append(np.exp(fitted + rng.choice(resid, resid.size)))
    smin, emin = fit_scaling_many(gs, rows)
    low, high = np.percentile(emin / smin, [2.5, 97.5])
    return float(low), float(high)


def lr_rule_predictions(gs, lr0, g0):
    """The LR each rule carries from LR0 at G0 to each G: {rule: [lr per G]}."""
    gs = np.asarray(gs, dtype=float)
    return {"fixed": [lr0] * gs.size, "linear": list(lr0 * gs / g0),
            "sqrt": list(lr0 * np.sqrt(gs / g0))}


def lr_rule_errors(gs, best_lrs, lr0, g0):
    """Per rule: the root-mean-square of ln(predicted / best LR) over the Gs other than G0
    (None when there are none). A rule that predicts every per-G optimum scores 0."""
    preds = lr_rule_predictions(gs, lr0, g0)
    out = {}
    for rule, lrs in preds.items():
        errs = [math.log(p / b) for g, p, b in zip(gs, lrs, best_lrs) if g != g0 and b]
        out[rule] = math.sqrt(np.mean(np.square(errs))) if errs else None
    return out


# ---- reading a study ----

def read_records(run_dir):
    """metrics.jsonl records of RUN_DIR (metrics.jsonl.gz when published); [] when absent."""
    for name, opener in (("metrics.jsonl", open), ("metrics.jsonl.gz", gzip.open)):
        path = Path(run_dir) / name
        if path.is_file():
            with opener(path, "rt") as f:
                return [json.loads(line) for line in f if line.strip()]
    return []


def run_setting(entry, run_dir):
    """(arm, G in sequences, seq_len, LR) of a manifest run: the run's config.toml, else the
    manifest's overrides, else the engine's defaults; the arm by arm_label."""
    cfg = {}
    try:
        toml = tomllib.loads((Path(run_dir) / "config.toml").read_text())
        cfg = {f"{s}.{k}": v for s, t in toml.items() if isinstance(t, dict) for k, v in t.items()}
    except (OSError, ValueError):
        pass

    def get(key, default=None):
        for src in (cfg, entry.get("overrides", {}), entry.get("axes", {})):
            if key in src:
                return src[key]
        return DEFAULTS.get(key, default)

    g = int(entry.get("world", 1)) * int(get("train.micro_batch")) * int(get("train.accum"))
    arm = arm_label(str(get("optim.name", "adamw")), entry.get("axes", {}))
    return arm, g, int(get("train.seq_len")), float(get("optim.lr"))


# The axes that place a run on its arm's ladder (its G, LR and seed) rather than name the arm.
LADDER_AXES = {"batch", "optim.lr", "train.seed", "optim.name", "train.micro_batch",
               "train.accum"}


def arm_label(optimizer, axes):
    """The arm of a run: its optimizer, then every other axis it sets as key=value (the key's last
    dotted part), sorted, so that a study over variants of one optimizer (beta2_half_life,
    optim.ema_half_life, ...) fits one B_crit per variant. "adamw" for a study of optimizers."""
    extra = []
    for key, value in sorted(axes.items()):
        if key in LADDER_AXES:
            continue
        try:
            value = format(float(value), "g")  # "8192.0" and "8192" are one arm
        except (TypeError, ValueError):
            value = str(value)
        extra.append(f"{key.split('.')[-1]}={value}")
    return " ".join([optimizer] + extra)


def read_study(study, manifest, target):
    """Per run that has finished or failed: name, arm (arm_label), G, seq_len, lr, final (bool),
    steps to target, final val loss and the (tokens, b_simple) points it logged."""
    runs = []
    for entry in manifest["runs"]:
        run_dir = Path(study) / "runs" / entry["name"]
        try:
            summary = json.loads((run_dir / "summary.json").read_text())
        except (OSError, ValueError):
            continue  # not run yet
        if summary.get("status") not in ("finished", "failed"):
            continue
        records = read_records(run_dir)
        arm, g, seq_len, lr = run_setting(entry, run_dir)
        runs.append({
            "name": entry["name"], "arm": arm, "g": g, "seq_len": seq_len, "lr": lr,
            "final": entry.get("phase") == "final" or entry["name"].startswith("final_"),
            "lr_base_batch": entry.get("lr_base_batch"),
            "steps": steps_to_target(records, target) if summary["status"] == "finished"
            else None,
            "final_val": summary.get("final_val_loss"),
            "summary": summary,
            # The evals and the raw per-step noise estimates, for other targets than the study's
            # (bcrit_targets.py); the memory ledger of each step is left out.
            "records": [{k: v for k, v in r.items() if k in ("step", "tokens", "val_loss",
                                                               "gns_trace", "gns_g2")}
                        for r in records],
            "split": "{}x{}x{}".format(entry.get("world", 1),
                                       entry.get("overrides", {}).get("train.micro_batch", "?"),
                                       entry.get("overrides", {}).get("train.accum", 1)),
            "b_simple": [(float(r["tokens"]), float(r["b_simple"])) for r in records
                         if r.get("b_simple") is not None and "tokens" in r],
            "b_simple_steps": {int(r["step"]): float(r["b_simple"]) for r in records
                               if r.get("b_simple") is not None and "step" in r}})
    return runs


def ladder(runs):
    """{arm: {G: point}}: per optimizer arm and G the sweep's best LR (fewest mean steps over its
    seeds, ties to the lower LR) and the steps to target reported: the finals' mean with a 95% t
    interval when every final of that G reached the target, else the sweep's best."""
    out = {}
    for arm in sorted({r["arm"] for r in runs}):
        out[arm] = {}
        for g in sorted({r["g"] for r in runs if r["arm"] == arm}):
            rs = [r for r in runs if r["arm"] == arm and r["g"] == g]
            sweep = {}
            for r in rs:
                if not r["final"]:
                    sweep.setdefault(r["lr"], []).append(r["steps"])
            lr, mean = best_lr(sweep)
            # A best LR at either end of a grid of 3 or more may have a better one beyond it.
            edge = lr is not None and len(sweep) >= 3 and lr in (min(sweep), max(sweep))
            finals = [r for r in rs if r["final"]]
            final_steps = [r["steps"] for r in finals]
            p = {"g": g, "seq_len": rs[0]["seq_len"], "best_lr": lr, "runs": len(rs),
                 "edge": edge,
                 "low": None, "high": None, "samples": None,
                 "runs_b_simple": finals or [r for r in rs if not r["final"] and r["lr"] == lr]}
            if finals and all(s is not None for s in final_steps):
                p["steps"], p["low"], p["high"] = t_interval(final_steps)
                p["samples"] = final_steps
                p["from"] = f"finals ({len(finals)} seeds, LR {finals[0]['lr']:g})"
                p["best_lr"] = lr if lr is not None else finals[0]["lr"]
            elif mean is not None:
                seeds = sweep[lr]
                p["steps"] = mean
                if len(seeds) >= 2:
                    _, p["low"], p["high"] = t_interval(seeds)
                p["samples"] = [mean]
                p["from"] = f"sweep best ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})" + \
                    (f"; {sum(s is None for s in final_steps)} of {len(finals)} finals missed "
                     "the target" if finals else "")
            else:
                p["steps"], p["from"] = None, "target not reached"
            p["tokens"] = None if p["steps"] is None else p["steps"] * g * p["seq_len"]
            out[arm][g] = p
    return out


def arm_fit(points):
    """The fit of one arm's ladder: dict(smin, emin, bcrit, verdict, low, high, gs, bootstrap),
    or None below 2 Gs that reached the target."""
    pts = [p for p in points.values() if p["steps"] is not None and p["steps"] > 0]
    if len(pts) < 2:  # (0 steps: the target was met before training; no log to fit)
        return None
    gs = [p["g"] for p in pts]
    smin, emin = fit_scaling(gs, [p["steps"] for p in pts])
    per_seed = all(len(p["samples"]) >= 2 for p in pts)
    low = high = None
    if per_seed or len(pts) >= 3:  # two Gs fit exactly: no residuals to resample
        low, high = bootstrap_bcrit(gs, [p["samples"] for p in pts])
    kind, value = b_crit_verdict(emin / smin, min(gs), max(gs))
    return {"smin": smin, "emin": emin, "bcrit": emin / smin, "verdict": kind, "value": value,
            "low": low, "high": high, "gs": gs, "seq_len": pts[0]["seq_len"],
            "bootstrap": "over the finals' seeds within each G" if per_seed
            else "of the fit's log residuals"}


# ---- figures ----


def scaling_plot(name, lad, fits, out):
    """Steps and tokens to target against G (log-log) per arm: the points with their 95% CI, the
    fitted S(G) = Smin + Emin/G, the perfect-scaling line S = Emin/G and B_crit."""
    plt = figures.pyplot()
    fig, axs = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
    for i, (arm, points) in enumerate(sorted(lad.items())):
        color = f"C{i}"
        pts = [p for _, p in sorted(points.items()) if p["steps"] is not None]
        if not pts:
            continue
        g = np.array([p["g"] for p in pts], dtype=float)
        seq = np.array([p["seq_len"] for p in pts], dtype=float)
        s = np.array([p["steps"] for p in pts])
        err = np.array([[p["steps"] - p["low"], p["high"] - p["steps"]] if p["low"] is not None
                        else [0.0, 0.0] for p in pts]).T
        axs[0].errorbar(g, s, yerr=err, fmt="o", color=color, capsize=3, label=arm)
        axs[1].errorbar(g, s * g * seq, yerr=err * g * seq, fmt="o", color=color, capsize=3,
                        label=arm)
        f = fits.get(arm)
        if not f:
            continue
        grid = np.geomspace(g.min() / 2, g.max() * 2, 200)
        curve = scaling_curve(grid, f["smin"], f["emin"])
        axs[0].plot(grid, curve, color=color,
                    label=f"{arm}: Smin {f['smin']:.0f} + Emin {f['emin']:.0f} / G")
        axs[0].plot(grid, f["emin"] / grid, color=color, linestyle=":", linewidth=1,
                    label=f"{arm}: perfect scaling Emin / G")
        axs[1].plot(grid, curve * grid * f["seq_len"], color=color)
        axs[1].axhline(f["emin"] * f["seq_len"], color=color, linestyle=":", linewidth=1)
        if f["verdict"] == "value":
            for ax in axs:
                ax.axvline(f["bcrit"], color=color, linestyle="--", linewidth=1)
            axs[0].plot([], [], color=color, linestyle="--", label=f"{arm}: B_crit "
                        f"{f['bcrit']:.1f} seq")
    for ax, what in zip(axs, ("steps", "tokens")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("global batch G (sequences)")
        ax.set_ylabel(f"{what} to target (mean, 95% CI)")
        ax.set_title(f"{name}: {what} to target vs G", fontsize=9)
    axs[0].legend(fontsize=6)
    return figures.save_figure(fig, out)


def lr_plot(name, lad, bases, out):
    """The per-G best LR against G (log-log) per arm with the fixed, linear and sqrt rules
    carried from the base G's best LR."""
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    drawn = False
    for i, (arm, points) in enumerate(sorted(lad.items())):
        pts = [p for _, p in sorted(points.items()) if p["best_lr"] is not None]
        if not pts or arm not in bases:
            continue
        drawn = True
        g = np.array([p["g"] for p in pts], dtype=float)
        ax.plot(g, [p["best_lr"] for p in pts], "o-", color=f"C{i}", label=f"{arm}: best LR")
        g0, lr0 = bases[arm]
        for rule, style in (("fixed", ":"), ("linear", "--"), ("sqrt", "-.")):
            ax.plot(g, lr_rule_predictions(g, lr0, g0)[rule], style, color=f"C{i}",
                    linewidth=1, label=f"{arm}: {rule} rule from G = {g0}")
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("global batch G (sequences)")
    ax.set_ylabel("LR (optim.lr)")
    ax.set_title(f"{name}: best LR per G and the LR rules", fontsize=9)
    ax.legend(fontsize=6)
    return figures.save_figure(fig, out)


def b_simple_plot(name, lad, fits, out):
    """B_simple (sequences) against tokens, one panel per arm: each G's finals (the best sweep
    LR's runs when there are no finals), a horizontal line at each G tried and at B_crit. The
    y range holds the 1st to 99th percentile of what was logged: an estimate from a micro-batch
    of one sequence spikes where |G|^2 is near 0, and would flatten the rest."""
    plt = figures.pyplot()
    arms = [a for a, pts in sorted(lad.items())
            if any(bcrit_targets.rolling_b_simple(r["records"])[0] for p in pts.values()
                   for r in p["runs_b_simple"])]
    if not arms:
        return None
    fig, axes = plt.subplots(1, len(arms), figsize=(4.5 * len(arms) + 1, 4.5), dpi=100,
                             sharey=True, squeeze=False)
    values, colors = [], {}
    for ax, arm in zip(axes[0], arms):
        for g, p in sorted(lad[arm].items()):
            color = colors.setdefault(g, f"C{len(colors) % 10}")
            for j, r in enumerate(p["runs_b_simple"]):
                t, b = bcrit_targets.rolling_b_simple(r["records"])
                if t:
                    values += [v for v in b if v > 0 and math.isfinite(v)]
                    ax.plot(t, b, color=color, linewidth=1, alpha=0.8,
                            label=f"G = {g}" if j == 0 else None)
            ax.axhline(g, color=color, linestyle=":", linewidth=1)
        f = fits.get(arm)
        if f and f["verdict"] == "value":
            ax.axhline(f["bcrit"], color="black", linestyle="--", linewidth=1,
                       label=f"B_crit {f['bcrit']:.1f} at the study's target")
        ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_title(f"{name}: {arm} (dotted: the Gs tried)", fontsize=9)
        ax.legend(fontsize=6)
    if values:
        lo, hi = np.percentile(values, [1, 99])
        axes[0][0].set_ylim(lo / 2, hi * 2)
    axes[0][0].set_ylabel("B_simple (sequences)")
    return figures.save_figure(fig, out)


# ---- the report's sections ----

def _num(x, digits=0):
    return "-" if x is None else f"{x:.{digits}f}"


def _bcrit_text(f):
    seq = f["seq_len"]
    if f["verdict"] == "above":
        return (f"B_crit > {f['value']} sequences ({f['value'] * seq} tokens), a lower bound: S "
                f"still falls about as 1/G at the largest G tried, so Smin is not resolved "
                f"(the fit's point value {f['bcrit']:.3g} lies beyond the ladder)")
    if f["verdict"] == "below":
        return (f"B_crit < {f['value']} sequences ({f['value'] * seq} tokens), an upper bound: S "
                f"is already flat at the smallest G tried (the fit's point value "
                f"{f['bcrit']:.3g} lies below the ladder)")
    ci = "no interval (too few Gs or seeds to resample)" if f["low"] is None else \
        (f"95% bootstrap interval [{f['low']:.1f}, {f['high']:.1f}] sequences "
         f"([{f['low'] * seq:.0f}, {f['high'] * seq:.0f}] tokens)")
    edge = "" if f["low"] is None or (f["low"] >= min(f["gs"]) and f["high"] <= max(f["gs"])) \
        else "; the interval reaches beyond the Gs tried"
    return f"B_crit = {f['bcrit']:.1f} sequences ({f['bcrit'] * seq:.0f} tokens), {ci}{edge}"


def report_lines(study, manifest, floors=None):
    """The REPORT.md sections of a steps-to-target study (figures written into STUDY). FLOORS:
    the val split's n-gram losses (study_report.data_baselines), whose bigram the targets of
    B_crit(L) run past."""
    study = Path(study)
    name = manifest.get("name", study.name)
    target = manifest.get("target_loss")
    if target is None:
        return ["## Steps to target", "", "The manifest has no target_loss: no batch-size "
                "analysis.", ""]
    target = float(target)
    runs = read_study(study, manifest, target)
    lad = ladder(runs)
    fits = {arm: f for arm, pts in lad.items() if (f := arm_fit(pts))}
    reached = sum(r["steps"] is not None for r in runs)
    best_final = {}
    for r in runs:
        if r["final_val"] is not None and math.isfinite(r["final_val"]):
            key = (r["arm"], r["g"])
            best_final[key] = min(best_final.get(key, math.inf), r["final_val"])
    lines = ["## Target loss", "",
             f"Target: val loss {target:g} nats/token (the study's target_loss), on the eval "
             "lines of metrics.jsonl (train.eval_windows windows of val). The comparison "
             "is the steps (and tokens) each global batch G needs to reach it, so it must lie "
             "above what every G reaches within its budget: "
             f"{reached} of {len(runs)} runs (finished or failed) reached it" +
             (f"; the worst of the per-(arm, G) best final val losses is "
              f"{max(best_final.values()):.4f}." if best_final else "."),
             "Steps to target: the first eval at or below the target, linear between it and the "
             "eval before (s0 + (s1 - s0)(l0 - target)/(l0 - l1)); tokens to target = steps x G x "
             "seq_len.", "",
             "## Steps to target per global batch", "",
             "| arm | G (sequences) | G (tokens) | best LR | steps to target | 95% CI | "
             "tokens to target | runs | from |", "|---|---|---|---|---|---|---|---|---|"]
    for arm, points in sorted(lad.items()):
        for g, p in sorted(points.items()):
            ci = f"[{p['low']:.1f}, {p['high']:.1f}]" if p["low"] is not None else "-"
            lines.append(f"| {arm} | {g} | {g * p['seq_len']} | "
                         f"{'-' if p['best_lr'] is None else format(p['best_lr'], 'g')}"
                         f"{' (edge of its sweep)' if p['edge'] else ''} | "
                         f"{_num(p['steps'], 1)} | {ci} | {_num(p['tokens'])} | {p['runs']} | "
                         f"{p['from']} |")
    lines += ["", "Best LR: the sweep's LR with the fewest mean steps over its seeds, every "
              "seed reaching the target (ties: the lower LR); at the edge of its sweep a better "
              "one may lie beyond it.", "", f"## Critical batch at the study's target ({target:g})",
              "",
              "Fit of McCandlish et al.'s (S/Smin - 1)(E/Emin - 1) = 1, E = G x S sequences, "
              "i.e. S(G) = Smin + Emin/G, by least squares in log S (relative errors) with Smin, "
              "Emin > 0; B_crit = Emin/Smin, to the steps table above (each G's finals, at the "
              "LR the sweep chose for this target). Interval: 2000 bootstrap resamples (fixed "
              "seed) of the finals' seeds within each G, 95% percentile: it holds the LR fixed "
              "and says nothing about other targets, so it is narrower than the uncertainty of "
              "B_crit itself; the next section refits at other targets and re-picks the LR. When "
              "B_crit falls outside the Gs tried the ladder does not straddle the knee and only "
              "a bound is reported.", ""]
    if not fits:
        lines += ["No arm has two Gs that reached the target: no fit.", ""]
    for arm, f in sorted(fits.items()):
        lines.append(f"- {arm}: Smin = {f['smin']:.1f} steps, Emin = {f['emin']:.0f} sequences "
                     f"({f['emin'] * f['seq_len']:.0f} tokens); {_bcrit_text(f)}; bootstrap "
                     f"{f['bootstrap']}.")
    png = scaling_plot(name, lad, fits, study / "steps_to_target.png")
    lines += ["", f"![steps and tokens to target vs G]({png})", "",
              "Solid: the fit; dotted: perfect scaling S = Emin/G (tokens constant); dashed "
              "vertical: B_crit.", ""]
    lines += bcrit_targets.section_lines(name, runs, lad, target, study,
                                         (floors or {}).get("bigram"))
    lines += lr_rule_lines(name, manifest, lad, study, target, runs)
    lines += large_batch_lines(lad, runs, target)
    lines += cost_lines(lad, target)
    png = b_simple_plot(name, lad, fits, study / "b_simple.png")
    lines += ["## Gradient noise scale over training", ""]
    if png:
        lines += [f"![B_simple vs tokens]({png})", "",
                  "B_simple = tr(Sigma)/|G|^2 as the ratio of centred 51-step rolling means of "
                  "the raw per-step estimates (metrics.jsonl gns_trace and gns_g2, in sequences), "
                  "for each G's finals (the best sweep LR's runs without finals). Not the logged "
                  "b_simple, whose 0.95 EMA keeps an early gradient spike for ~200 steps. "
                  "McCandlish et al.: the noise scale grows as the loss falls; the table of "
                  "B_simple(L) above sets it against B_crit(L) target by target.", ""]
    else:
        lines += ["No run logged the per-step noise estimates (train.gns = true logs them).",
                  ""]
    return lines


def lr_rule_lines(name, manifest, lad, study, target, runs=()):
    """The per-G best LR against the fixed, linear and sqrt rules from the base G's best LR: the
    lr_base_batch the plan recorded in the arm's runs (else the manifest's, else the smallest
    G)."""
    lines = ["## LR rules against the per-G optimum", ""]
    bases, rows = {}, []
    for arm, points in sorted(lad.items()):
        tuned = {g: p["best_lr"] for g, p in points.items() if p["best_lr"] is not None}
        if len(tuned) < 2:
            continue
        recorded = [r["lr_base_batch"] for r in runs
                    if r["arm"] == arm and r.get("lr_base_batch") is not None]
        g0 = recorded[0] if recorded else manifest.get("lr_base_batch")
        g0 = int(g0) if g0 is not None and int(g0) in tuned else min(tuned)
        bases[arm] = (g0, tuned[g0])
        gs = sorted(tuned)
        errs = lr_rule_errors(gs, [tuned[g] for g in gs], tuned[g0], g0)
        best = min((e, r) for r, e in errs.items() if e is not None)[1]
        rows.append(f"| {arm} | {g0} | {tuned[g0]:g} | " +
                    " | ".join(_num(errs[r], 3) for r in ("fixed", "linear", "sqrt")) +
                    f" | {best} |")
    if not rows:
        return lines + ["No arm has a best LR at two Gs: no comparison.", ""]
    lines += [f"At the study's target ({target:g}) only: the per-G best LR moves with the "
              "target (previous section). Each rule carries the base G's best LR (the study's "
              "lr_base_batch, else the "
              "smallest G) to the other Gs; error: root-mean-square of ln(predicted / best LR) "
              "over the other Gs (0: every optimum predicted; ln 2 = 0.693 is a factor of 2). The "
              "best LR is only as fine as the swept grid.", "",
              "| arm | base G | base LR | fixed | linear | sqrt | closest rule |",
              "|---|---|---|---|---|---|---|"] + rows
    png = lr_plot(name, lad, bases, study / "lr_vs_batch.png")
    return lines + ["", f"![best LR vs G]({png})", ""]


def cost_lines(lad, target):
    """What each global batch costs: its split, the activations' and all tracked bytes at their
    peak (the run's ledger, rank 0), step time, tokens/s, and B_simple where it reached the
    target; means over the runs the steps table reports (finals, else the sweep's best LR)."""
    lines = ["## Memory, speed and noise scale per global batch", "",
             "Per arm and G, over the runs the steps table reports: the split world x micro-batch "
             "x accumulation, the peak bytes of activations and of everything the ledger tracks "
             "(rank 0), ms per optimizer step, tokens/s (1 thread per run), and B_simple at the "
             "target: window means of the raw per-step estimates over the steps within "
             f"+-{bcrit_targets.LOSS_HALF_WINDOW:g} nats of it, pooled over these runs "
             "(sequences; not the logged EMA, which carries early gradient spikes for ~200 "
             "steps).", "",
             "| arm | G | split | activations peak (MB) | tracked peak (MB) | step ms | "
             "tokens/s | B_simple at target |", "|---|---|---|---|---|---|---|---|"]

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    for arm, points in sorted(lad.items()):
        for g, p in sorted(points.items()):
            runs = p["runs_b_simple"]
            if not runs:
                continue
            mem = [r["summary"].get("mem", {}) for r in runs]
            act = mean([m.get("activations", {}).get("peak") for m in mem])
            total = mean([m.get("total", {}).get("peak") for m in mem])
            step_ms = mean([r["summary"]["train_s"] * 1000.0 / r["summary"]["steps"]
                            for r in runs
                            if r["summary"].get("steps") and "train_s" in r["summary"]])
            tps = mean([r["summary"].get("mean_tokens_per_s") for r in runs])
            bs = bcrit_targets.pooled_b_simple(runs, target)[0]
            lines.append(f"| {arm} | {g} | {runs[0]['split']} | "
                         f"{'-' if act is None else format(act / 1e6, '.2f')} | "
                         f"{'-' if total is None else format(total / 1e6, '.2f')} | "
                         f"{_num(step_ms, 2)} | {_num(tps)} | {_num(bs, 1)} |")
    return lines + [""]


def selection_lines(manifest):
    """What `study run` chose for each finals arm: the sweep setting with the fewest mean steps
    to target over its seeds (manifest finals.arms), and how many settings it compared."""
    arms = (manifest.get("finals") or {}).get("arms") or {}
    if not arms:
        return []
    lines = ["## Selection", "",
             "Each finals arm's setting, as `ledgerlm study run` chose it: the fewest mean steps "
             "to target over the sweep's seeds (a run that missed the target or failed loses); "
             "the finals retrain it on fresh seeds.", "",
             "| arm | chosen setting | mean steps to target (sweep) | settings compared |",
             "|---|---|---|---|"]
    for arm, a in sorted(arms.items()):
        steps = a.get("selection_steps_to_target")
        lines.append(f"| {arm} | {a.get('from', '-')} | "
                     f"{'-' if steps is None else format(steps, '.1f')} | "
                     f"{a.get('settings', '-')} |" + ("" if "note" not in a else f" {a['note']}"))
    return lines + [""]


def large_batch_lines(lad, runs, target):
    """Steps to target per optimizer arm at the largest G that two arms or more reached: at the
    study's target (the steps table's points) and at each target of bcrit_targets.target_grid
    (each arm's best LR at that target, every run of an LR pooled)."""
    shared = [g for g in {g for pts in lad.values() for g in pts}
              if sum(g in pts and pts[g]["steps"] is not None for pts in lad.values()) >= 2]
    if not shared:
        return []
    g = max(shared)
    pts = sorted(((pts[g]["steps"], arm, pts[g]) for arm, pts in lad.items()
                  if g in pts and pts[g]["steps"] is not None), key=lambda t: t[0])
    lines = [f"## Large batch: optimizers at G = {g}", "",
             "Steps to target of each arm at the largest G two arms or more reached; ratio: "
             "steps over the fewest.", "",
             "| arm | best LR | steps to target | 95% CI | tokens to target | ratio | from |",
             "|---|---|---|---|---|---|---|"]
    fewest = pts[0][0]
    for steps, arm, p in pts:
        ci = f"[{p['low']:.1f}, {p['high']:.1f}]" if p["low"] is not None else "-"
        lines.append(f"| {arm} | {p['best_lr']:g} | {steps:.1f} | {ci} | {p['tokens']:.0f} | "
                     f"{steps / fewest:.2f} | {p['from']} |")
    arms = sorted(arm for arm, pts in lad.items() if g in pts)
    lines += ["", "The same at each target (a ranking at one target need not hold at another: "
              "an arm whose loss plateaus falls behind below its plateau). Steps to L of each "
              "arm's best LR at L (every run of an LR pooled; in brackets the LR and its runs); "
              "ratio: over the fewest at that target.", "",
              "| target L | " + " | ".join(arms) + " | fewest |",
              "|---|" + "---|" * (len(arms) + 1)]
    # Below the grid, on until no arm reaches the target: where a plateau reverses a ranking.
    targets = bcrit_targets.target_grid(target)
    while len(targets) < 30 and any(
            best_lr(bcrit_targets.cells_at(runs, arm, targets[-1]).get(g, {}))[0] is not None
            for arm in arms):
        targets.append(round(targets[-1] - 0.1, 6))
    for t in targets:
        cells, best = [], {}
        for arm in arms:
            by_lr = bcrit_targets.cells_at(runs, arm, t).get(g, {})
            lr, steps = best_lr(by_lr)
            if lr is not None:
                best[arm] = steps
            cells.append((arm, lr, steps, len(by_lr.get(lr, []))))
        fewest = min(best.values()) if best else None
        row = []
        for arm, lr, steps, n in cells:
            row.append("not reached" if lr is None else
                       f"{steps:.1f} ({lr:g}, {n}) x{steps / fewest:.2f}")
        fastest = min(best, key=best.get) if best else "-"
        lines.append(f"| {t:g} | " + " | ".join(row) + f" | {fastest} |")
    return lines + [""]
