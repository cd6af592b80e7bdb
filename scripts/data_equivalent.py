"""The data-equivalent speedup of each optimizer over the baseline, as Wen et al. measure it
("Fantastic Pretraining Optimizers and Where to Find Them", 2025): fit the baseline's final loss
against the tokens it trained on across budgets, invert the fit at each arm's final loss, and
divide: how many times the tokens the baseline would need to reach what the arm reached.

Used by scripts/study_report.py for studies whose finals select on `train.max_tokens` (a budget
ladder) and name a baseline optimizer. A *family* is the final arms that share every select axis
except the optimizer and the budget (one per model size, say); each family has its own fit.

- Fit: ln L = a - b ln D through the baseline's mean final loss at each budget (the mean over
  its seeds, as the arm's loss is), least squares over the budgets. A power law without a floor:
  with three budgets, a floor term would pass through the three means exactly and extrapolate
  without restraint; this law keeps one degree of freedom, and its lack of fit is printed (the
  largest gap between a budget's mean and the fit). Means on both sides: an arm that reaches at
  every seed what the baseline reaches at that seed with twice the tokens gets exactly 2x, with
  any spread between seeds.
- Speedup at budget D: D_eq / D, D_eq = exp((a - ln L_arm) / b), L_arm the arm's mean final loss
  over its seeds. An L_arm below the baseline's mean at its largest budget (or above it at its
  smallest) is reached only by extrapolating the fit: the table marks it.
- Intervals: a bootstrap over seeds. The finals run the same seeds in every arm and budget, so a
  resample draws seed indices once and uses them in every cell of the family (the fit and every
  arm's mean move together, as the paired design has them); 95% percentile interval over
  RESAMPLES resamples from a fixed seed. A resample whose fit does not fall with D (b <= 0) has no
  speedup and is counted.
- With budget: per arm, the slope of ln(speedup) against log2(D), reported as the factor the
  speedup changes by per doubling of tokens, with its bootstrap interval; "shrinks" only where
  the whole interval lies below 1, "grows" where above.
- Across families (sizes): per arm, the geometric mean of its speedups over the budgets in each
  family, and the ratio of each family's to the first one's, with an interval from independent
  resamples of the two families (different runs).

tests/tools/test_data_equivalent.py checks the fit, the inversion and the bootstrap's pairing.
"""
import math

import numpy as np

import figures

BUDGET = "train.max_tokens"
OPTIM = "optim.name"
RESAMPLES = 2000
RESAMPLE_SEED = 20250901


def fit_power_law(tokens, losses):
    """(a, b) of ln L = a - b ln D by least squares over the points; None below two distinct D."""
    x = np.log(np.asarray(tokens, dtype=float))
    y = np.log(np.asarray(losses, dtype=float))
    if x.size < 2 or np.ptp(x) == 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(-slope)


def equivalent_tokens(fit, loss):
    """The tokens at which the fitted baseline reaches LOSS; None when the fit does not fall."""
    if fit is None or loss is None or not (loss > 0) or fit[1] <= 0:
        return None
    return math.exp((fit[0] - math.log(loss)) / fit[1])


def families(final_arms, select, baseline):
    """{family key: {"base": {D: arm}, "arms": {optimizer: {D: arm}}}} over the final arms that
    select on BUDGET; the key is the select axes other than the optimizer and the budget."""
    out = {}
    if BUDGET not in select or baseline is None:
        return out
    for arm, info in final_arms.items():
        if info.get("wall_clock"):
            continue
        axes = info["axes"]
        if axes.get(BUDGET) is None:
            continue
        key = tuple((k, axes.get(k)) for k in select if k not in (OPTIM, BUDGET))
        fam = out.setdefault(key, {"base": {}, "arms": {}})
        d = float(axes[BUDGET])
        if axes.get(OPTIM) == baseline:
            fam["base"][d] = arm
        else:
            fam["arms"].setdefault(axes.get(OPTIM), {})[d] = arm
    def order(key):  # numbers by value (a width of 80 after 32), then text
        return [(0, float(v), "") if _number(v) else (1, 0.0, str(v)) for _, v in key]
    return {k: out[k] for k in sorted(out, key=order) if len(out[k]["base"]) >= 2}


def _number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def cell_losses(arm_seeds, seeds):
    """The losses of ARM_SEEDS ({seed: loss}) at SEEDS, in that order (a seed drawn twice counts
    twice); the seeds the arm lacks are skipped."""
    return [arm_seeds[s] for s in seeds if s in arm_seeds]


def family_estimates(fam, final_arms, seeds):
    """The fit and every arm's speedup per budget on the runs of SEEDS (a list, repeats allowed):
    {"fit", "speedup": {opt: {D: s or None}}}."""
    means = [(d, float(np.mean(ls))) for d, arm in fam["base"].items()
             if (ls := cell_losses(final_arms[arm]["seeds"], seeds))]
    fit = fit_power_law([m[0] for m in means], [m[1] for m in means])
    out = {}
    for opt, cells in fam["arms"].items():
        out[opt] = {}
        for d, arm in cells.items():
            losses = cell_losses(final_arms[arm]["seeds"], seeds)
            eq = equivalent_tokens(fit, float(np.mean(losses))) if losses else None
            out[opt][d] = eq / d if eq is not None else None
    return {"fit": fit, "speedup": out}


def budget_trend(speedups):
    """The factor the speedup changes by per doubling of tokens: exp of the least-squares slope
    of ln s against log2 D over the budgets with a speedup; None below two."""
    pts = [(math.log2(d), math.log(s)) for d, s in sorted(speedups.items()) if s and s > 0]
    if len(pts) < 2:
        return None
    slope = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0]
    return float(math.exp(slope))


def geometric_mean(speedups):
    vals = [s for s in speedups.values() if s and s > 0]
    if not vals or len(vals) < len(speedups):
        return None
    return float(math.exp(np.mean(np.log(vals))))


def family_seeds(fam, final_arms):
    """The seeds every cell of the family has (the finals' shared seeds)."""
    cells = list(fam["base"].values()) + [a for c in fam["arms"].values() for a in c.values()]
    common = set(final_arms[cells[0]]["seeds"])
    for arm in cells[1:]:
        common &= set(final_arms[arm]["seeds"])
    return sorted(common)


def bootstrap(fam, final_arms, resamples=RESAMPLES, seed=RESAMPLE_SEED):
    """RESAMPLES resamples of the family's shared seeds (one draw for every cell): a list of
    family_estimates. Empty below two shared seeds."""
    seeds = family_seeds(fam, final_arms)
    if len(seeds) < 2:
        return []
    rng = np.random.default_rng(seed)
    return [family_estimates(fam, final_arms, [seeds[i] for i in rng.integers(0, len(seeds),
                                                                              len(seeds))])
            for _ in range(resamples)]


def percentile_interval(values):
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return None, None
    low, high = np.percentile(vals, [2.5, 97.5])
    return float(low), float(high)


def family_label(key):
    return ", ".join(f"{k} = {v}" for k, v in key) or "all finals"


def fmt_x(x):
    return "-" if x is None else f"{x:.2f}x"


def fmt_ci(low, high):
    return "-" if low is None else f"[{low:.2f}x, {high:.2f}x]"


def trend_word(low, high):
    if low is None:
        return "-"
    if high < 1:
        return "shrinks"
    if low > 1:
        return "grows"
    return "no trend shown"


def plot(study_dir, fams, final_arms, name):
    plt = figures.pyplot()
    fig, axes = plt.subplots(1, len(fams), figsize=(5.5 * len(fams), 4), squeeze=False)
    for ax, (key, fam) in zip(axes[0], fams.items()):
        est = family_estimates(fam, final_arms, family_seeds(fam, final_arms))
        base = sorted(fam["base"].items())
        for d, arm in base:
            ls = list(final_arms[arm]["seeds"].values())
            ax.scatter([d] * len(ls), ls, color="k", s=8, alpha=0.5)
        if est["fit"]:
            ds = np.geomspace(base[0][0] / 2, base[-1][0] * 2, 50)
            ax.plot(ds, np.exp(est["fit"][0] - est["fit"][1] * np.log(ds)), "k--",
                    label="baseline fit")
        for opt, cells in sorted(fam["arms"].items()):
            pts = sorted((d, final_arms[a]["mean"]) for d, a in cells.items())
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=opt)
        ax.set_xscale("log")
        ax.set_xlabel("tokens (budget)")
        ax.set_ylabel("final loss (mean over seeds)")
        ax.set_title(f"{name}: {family_label(key)}", fontsize=9)
        ax.legend(fontsize=7)
    return figures.save_figure(fig, study_dir / "data_equivalent.png")


def report_lines(study_dir, final_arms, select, baseline, split, name):
    """The report's section, or [] when the finals hold no budget ladder of the baseline."""
    fams = families(final_arms, select, baseline)
    if not fams:
        return []
    lines = ["## Data-equivalent speedup", "",
             f"How many times the tokens `{baseline}` would need to reach each arm's mean final "
             f"{split} loss (Wen et al. 2025): per family, ln L = a - b ln D fitted to "
             f"`{baseline}`'s mean final loss at each budget, inverted at the arm's mean loss, "
             "divided by the arm's budget. Intervals: 95% percentile over "
             f"{RESAMPLES} bootstrap resamples of the seeds, one draw shared by every arm and "
             "budget of a family (the pairing of the finals kept). \"extrapolated\": the arm's "
             f"loss lies outside the range of `{baseline}`'s budget means, so the fit is read "
             "beyond its data.", ""]
    boots = {key: bootstrap(fam, final_arms) for key, fam in fams.items()}
    geo = {}
    for key, fam in fams.items():
        seeds = family_seeds(fam, final_arms)
        est = family_estimates(fam, final_arms, seeds)
        fit = est["fit"]
        base_means = {d: float(np.mean(cell_losses(final_arms[a]["seeds"], seeds)))
                      for d, a in fam["base"].items()}
        lines += [f"### {family_label(key)}", ""]
        if fit is None or fit[1] <= 0:
            lines += [f"`{baseline}`'s loss does not fall with tokens here: no speedup.", ""]
            continue
        gap = max(abs(m - math.exp(fit[0] - fit[1] * math.log(d))) for d, m in base_means.items())
        lines += [f"Fit on {len(seeds)} shared seeds: L = {math.exp(fit[0]):.4g} x D^-{fit[1]:.4f}; "
                  f"the largest gap between a budget's mean and the fit is {gap:.4f} nats "
                  f"(`{baseline}`'s means: " +
                  ", ".join(f"{m:.4f} at {d:.0f}" for d, m in sorted(base_means.items())) + ").",
                  "", f"| optimizer | budget (tokens) | mean {split} loss | `{baseline}`-equivalent "
                  "tokens | speedup | 95% CI | |", "|---|---|---|---|---|---|---|"]
        lo_m, hi_m = min(base_means.values()), max(base_means.values())
        boot = boots[key]
        for opt, cells in sorted(fam["arms"].items()):
            for d, arm in sorted(cells.items()):
                loss = float(np.mean(cell_losses(final_arms[arm]["seeds"], seeds)))
                s = est["speedup"][opt][d]
                low, high = percentile_interval([b["speedup"][opt][d] for b in boot])
                note = "extrapolated" if loss < lo_m or loss > hi_m else ""
                eq = "-" if s is None else f"{s * d:.0f}"
                lines.append(f"| {opt} | {d:.0f} | {loss:.4f} | {eq} | {fmt_x(s)} | "
                             f"{fmt_ci(low, high)} | {note} |")
        failed = sum(1 for b in boot if b["fit"] is None or b["fit"][1] <= 0)
        if failed:
            lines.append(f"\n{failed} of {len(boot)} resamples had a fit that does not fall "
                         "with tokens: they give no speedup and are left out of the intervals.")
        lines += ["", "With budget: the factor each optimizer's speedup changes by per doubling "
                  "of tokens (the least-squares slope of ln speedup on log2 tokens), with its "
                  "bootstrap interval; \"shrinks\" only where the whole interval is below 1.", "",
                  "| optimizer | per doubling of tokens | 95% CI | |", "|---|---|---|---|"]
        for opt in sorted(fam["arms"]):
            t = budget_trend(est["speedup"][opt])
            low, high = percentile_interval([budget_trend(b["speedup"][opt]) for b in boot])
            lines.append(f"| {opt} | {fmt_x(t)} | {fmt_ci(low, high)} | {trend_word(low, high)} |")
        lines.append("")
        geo[key] = {opt: (geometric_mean(est["speedup"][opt]),
                          [geometric_mean(b["speedup"][opt]) for b in boot])
                    for opt in fam["arms"]}
    keys = list(geo)
    if len(keys) >= 2:
        first = keys[0]
        lines += ["### Across families", "",
                  "Each optimizer's speedup averaged over the budgets (geometric mean) per "
                  f"family, and its ratio to the first family's ({family_label(first)}); the "
                  "ratio's interval pairs independent resamples of the two families (their runs "
                  "differ); \"smaller\" or \"larger\" only where the whole interval lies on one "
                  "side of 1.", "",
                  "| optimizer | " + " | ".join(family_label(k) for k in keys) +
                  " | " + " | ".join(f"ratio {family_label(k)}" for k in keys[1:]) + " |",
                  "|---|" + "---|" * (2 * len(keys) - 1)]
        for opt in sorted(set.intersection(*(set(geo[k]) for k in keys))):
            row = [fmt_x(geo[k][opt][0]) for k in keys]
            for k in keys[1:]:
                a, b = geo[first][opt], geo[k][opt]
                r = b[0] / a[0] if a[0] and b[0] else None
                ratios = [y / x for x, y in zip(a[1], b[1]) if x and y]
                low, high = percentile_interval(ratios)
                word = {"shrinks": "smaller", "grows": "larger"}.get(trend_word(low, high),
                                                                    trend_word(low, high))
                row.append(f"{fmt_x(r)} {fmt_ci(low, high)} {word}")
            lines.append(f"| {opt} | " + " | ".join(row) + " |")
        lines.append("")
    png = plot(study_dir, fams, final_arms, name)
    lines += [f"![data-equivalent speedup]({png})", "",
              f"Black: `{baseline}`'s final runs (one dot per seed) and its fit; lines: each "
              "optimizer's mean final loss per budget.", ""]
    return lines
