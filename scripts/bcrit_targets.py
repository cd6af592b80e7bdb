"""B_crit and B_simple as functions of the target loss L, for a steps-to-target study
(scripts/batch_science.py reads the runs and fits one target; this module repeats it over a grid
of targets and measures the gradient noise scale from the raw per-step estimates).

Why: the critical batch of McCandlish et al. (2018) is a function of the loss reached, B_crit(L),
and grows as L falls; a single target gives one point of it, and a bootstrap over the finals'
seeds at the LR selected for that target ignores the other targets and the noise in the LR
choice itself (a one-seed sweep per G). Their B_simple = tr(Sigma) / |G|^2 predicts B_crit(L) only
when measured at L: the 0.95 EMA that train.gns logs keeps an early gradient spike for ~200 steps,
so the EMA at the step a run reaches L mixes in what happened long before.

- B_crit(L): per G, every LR cell (the runs of one G and LR, sweep and finals pooled) gives its
  steps to L; the LR with the fewest mean steps among the cells whose every run reached L is the
  G's point; S(G) = Smin + Emin / G is fitted to them (batch_science.fit_scaling). The bootstrap
  resamples every cell (its own runs with replacement where it has two or more; a one-run cell
  gets its value times exp(e), e drawn from the log deviations of the multi-run cells around
  their means, scaled by sqrt(n / (n - 1))), re-picks each G's LR and refits.
- B_simple(L): the ratio of the window means of the raw per-step estimates (metrics.jsonl
  gns_trace and gns_g2) over the steps at which the run's eval curve lies within +-0.05 nats of L,
  pooled over the runs of an (arm, G) (sum of traces over sum of |G|^2 estimates: a ratio of
  means, not a mean of ratios, which a step with |G|^2 near 0 would dominate).

tests/tools/test_batch_science.py checks these functions against hand-computed values.
"""
import math

import numpy as np

import batch_science as bs
import figures

TARGET_RESAMPLES = 1000
TARGET_SEED = 20180615  # fixed: the same runs give the same intervals every time
LOSS_HALF_WINDOW = 0.05  # nats either side of L for the B_simple window


def target_grid(target, above=0.6, below=0.3, step=0.1):
    """The targets the report fits: from TARGET + ABOVE down to TARGET - BELOW in steps of STEP
    (the study's own target included), highest first."""
    up, down = round(above / step), round(below / step)
    return [round(target + step * k, 6) for k in range(up, -down - 1, -1)]


def targets_past(target, bigram=None, step=0.1, limit=30):
    """target_grid(TARGET), extended in STEP steps until it lies below BIGRAM (the val split's
    bigram loss, when known): the study of B_crit(L) runs past the point where a model has
    learnt more than pairs of tokens."""
    targets = target_grid(target, step=step)
    while bigram is not None and targets[-1] >= bigram and targets[-1] > step and \
            len(targets) < limit:
        targets.append(round(targets[-1] - step, 6))
    return targets


def lr_key(lr):
    """An LR as a cell key: sweep and finals write the same LR through different paths."""
    return float(f"{float(lr):.6g}")


def run_steps(run, target):
    """Steps RUN needed to reach TARGET on its eval curve; None if it did not or it failed."""
    if run["summary"].get("status") != "finished":
        return None
    return bs.steps_to_target(run["records"], target)


def cells_at(runs, arm, target):
    """{G: {lr: [steps to TARGET or None, one per run]}} over every run of ARM, sweep and
    finals pooled."""
    out = {}
    for r in runs:
        if r["arm"] == arm:
            out.setdefault(r["g"], {}).setdefault(lr_key(r["lr"]), []).append(run_steps(r, target))
    return out


def residual_pool(cells):
    """The log deviations of each run from its cell's mean, over the cells with two runs or more
    that all reached the target, each scaled by sqrt(n / (n - 1)) (a deviation from a mean of n
    is smaller than one from the true value)."""
    pool = []
    for by_lr in cells.values():
        for xs in by_lr.values():
            if len(xs) >= 2 and all(x is not None and x > 0 for x in xs):
                logs = np.log(np.asarray(xs, dtype=float))
                pool += list((logs - logs.mean()) * math.sqrt(len(xs) / (len(xs) - 1)))
    return np.asarray(pool, dtype=float)


def resample_cells(cells, pool, rng):
    """One bootstrap draw of CELLS (see the module comment)."""
    out = {}
    for g, by_lr in cells.items():
        out[g] = {}
        for lr, xs in by_lr.items():
            if len(xs) >= 2:
                out[g][lr] = [xs[i] for i in rng.integers(0, len(xs), len(xs))]
            elif xs[0] is None or pool.size == 0:
                out[g][lr] = list(xs)
            else:
                out[g][lr] = [xs[0] * math.exp(pool[rng.integers(0, pool.size)])]
    return out


def fit_cells(cells):
    """(B_crit or None, {G: (best LR, mean steps)}, smin, emin): None when a G has no LR whose
    every run reached the target, or fewer than 2 Gs."""
    best = {g: bs.best_lr(by_lr) for g, by_lr in cells.items()}
    if len(best) < 2 or any(lr is None or mean <= 0 for lr, mean in best.values()):
        return None, best, None, None
    gs = sorted(best)
    smin, emin = bs.fit_scaling(gs, [best[g][1] for g in gs])
    return emin / smin, best, smin, emin


def bcrit_at(runs, arm, target, resamples=TARGET_RESAMPLES, seed=TARGET_SEED):
    """B_crit of ARM at TARGET with its bootstrap: dict(target, bcrit, smin, emin, best, verdict,
    value, low, high, repicked (the share of resamples whose LR differs from the point's at some
    G), kept (resamples where every G reached the target), missing (Gs none of whose LRs
    reached it), pool (runs in the residual pool))."""
    cells = cells_at(runs, arm, target)
    bcrit, best, smin, emin = fit_cells(cells)
    out = {"target": target, "bcrit": bcrit, "smin": smin, "emin": emin, "best": best,
           "missing": sorted(g for g, (lr, _) in best.items() if lr is None),
           "low": None, "high": None, "repicked": None, "kept": 0, "verdict": None,
           "value": None, "pool": 0}
    if bcrit is None:
        return out
    gs = sorted(best)
    out["verdict"], out["value"] = bs.b_crit_verdict(bcrit, min(gs), max(gs))
    pool = residual_pool(cells)
    out["pool"] = int(pool.size)
    rng = np.random.default_rng(seed)
    rows, changed = [], 0
    for _ in range(resamples):
        row, picked = best_row(resample_cells(cells, pool, rng), gs)
        if row is None:
            continue
        rows.append(row)
        changed += any(picked[g][0] != best[g][0] for g in gs)
    out["kept"] = len(rows)
    if rows:
        smin, emin = bs.fit_scaling_many(gs, rows)
        out["low"], out["high"] = (float(x) for x in np.percentile(emin / smin, [2.5, 97.5]))
        out["repicked"] = changed / len(rows)
    return out


def best_row(cells, gs):
    """(the mean steps of each G's best LR in CELLS, in the order of GS, or None when a G has no
    LR whose every run reached the target; {G: (LR, mean)}): one ladder for fit_scaling_many."""
    best = {g: bs.best_lr(cells.get(g, {})) for g in gs}
    if any(lr is None or mean <= 0 for lr, mean in best.values()):
        return None, best
    return [best[g][1] for g in gs], best


# ---- B_crit against the tokens to each target, with one bootstrap for every target ----

RATIO_BAND = (0.5, 2.0)  # B_simple / B_crit within a factor of 2: McCandlish et al.'s prediction


def run_cells(runs, arm):
    """{G: {lr: [runs]}} over every run of ARM (sweep and finals pooled)."""
    out = {}
    for r in runs:
        if r["arm"] == arm:
            out.setdefault(r["g"], {}).setdefault(lr_key(r["lr"]), []).append(r)
    return out


def joint_draws(runs, arm, targets, resamples=TARGET_RESAMPLES, seed=TARGET_SEED):
    """RESAMPLES bootstrap draws of ARM's runs shared by every target: per draw, {target:
    (B_crit or None, smin, emin)}, None where the refit at that target misses a G or falls
    outside the Gs tried. One draw picks each LR cell's runs (with replacement, two runs or
    more) once for all targets, so a lucky seed is lucky at every target and the slope over
    targets sees the correlation; a one-run cell gets one log deviation (drawn from every
    target's residual_pool) applied at every target. Each target re-picks each G's LR."""
    cells = run_cells(runs, arm)
    steps = {id(r): [run_steps(r, t) for t in targets] for by_lr in cells.values()
             for rs in by_lr.values() for r in rs}
    pool = np.concatenate([residual_pool(cells_at(runs, arm, t)) for t in targets] or
                          [np.zeros(0)])
    gs = sorted(cells)
    rng = np.random.default_rng(seed)
    rows = {t: [] for t in targets}  # per target: (draw index, ladder) for one batched fit
    for n in range(resamples):
        picked = {}  # (G, lr) -> (list of per-run step vectors, multiplier)
        for g in gs:
            for lr, rs in cells[g].items():
                if len(rs) >= 2:
                    picked[g, lr] = ([steps[id(rs[i])] for i in rng.integers(0, len(rs), len(rs))],
                                     1.0)
                else:
                    mult = math.exp(pool[rng.integers(0, pool.size)]) if pool.size else 1.0
                    picked[g, lr] = ([steps[id(rs[0])]], mult)
        for k, t in enumerate(targets):
            by_g = {}
            for (g, lr), (vectors, mult) in picked.items():
                by_g.setdefault(g, {})[lr] = [None if v[k] is None else v[k] * mult
                                              for v in vectors]
            row, _ = best_row(by_g, gs)
            if row is not None:
                rows[t].append((n, row))
    draws = [{t: None for t in targets} for _ in range(resamples)]
    for t, fitted in rows.items():
        if len(gs) < 2 or not fitted:
            continue
        smin, emin = bs.fit_scaling_many(gs, [row for _, row in fitted])
        for (n, _), sm, em in zip(fitted, smin, emin):
            b = em / sm
            if bs.b_crit_verdict(b, min(gs), max(gs))[0] == "value":
                draws[n][t] = (float(b), float(sm), float(em))
    return draws


def exponent_fit(points):
    """Least-squares slope of ln B_crit against ln (tokens to target) over POINTS [(tokens,
    B_crit)]: (slope, intercept), or None below 3 points."""
    if len(points) < 3:
        return None
    x = np.log([p[0] for p in points])
    y = np.log([p[1] for p in points])
    if np.ptp(x) <= 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def bcrit_exponent(results, draws, seq_len, only=None):
    """B_crit's exponent against the tokens to target, Emin x seq_len (the fewest tokens that reach
    L: McCandlish et al.'s small-batch limit). RESULTS: bcrit_at per target; DRAWS: joint_draws;
    ONLY: the targets to fit (None: every resolved one). dict(slope, intercept, n (targets in the
    point fit), low, high (95% percentile over the draws with 3 targets or more), kept) or None
    below 3 resolved targets."""
    pts = [(b["emin"] * seq_len, b["bcrit"]) for b in results if b["verdict"] == "value" and
           (only is None or b["target"] in only)]
    fit = exponent_fit(pts)
    if fit is None:
        return None
    slopes = []
    for draw in draws:
        d = exponent_fit([(v[2] * seq_len, v[0]) for t, v in draw.items()
                          if v is not None and (only is None or t in only)])
        if d is not None:
            slopes.append(d[0])
    out = {"slope": fit[0], "intercept": fit[1], "n": len(pts), "low": None, "high": None,
           "kept": len(slopes)}
    if slopes:
        out["low"], out["high"] = (float(x) for x in np.percentile(slopes, [2.5, 97.5]))
    return out


def ratio_verdict(ratio, low=None, high=None, band=RATIO_BAND):
    """Whether B_simple / B_crit lies within BAND: "within", "outside", or "undecided" when the
    point lies within but the interval [LOW, HIGH] crosses an edge, or outside but the interval
    reaches in; "-" without a ratio."""
    if ratio is None:
        return "-"
    inside = band[0] <= ratio <= band[1]
    if low is None or high is None:
        return "within" if inside else "outside"
    if band[0] <= low and high <= band[1]:
        return "within"
    if high < band[0] or low > band[1]:
        return "outside"
    return "within, interval crosses an edge" if inside else "outside, interval reaches in"


# ---- B_simple from window means of the raw per-step estimates ----

def window_sums(records, target, half=LOSS_HALF_WINDOW):
    """(sum of gns_trace, sum of gns_g2, steps) over the steps at which the eval curve lies
    within +-HALF of TARGET: from the step it first reaches TARGET + HALF to the step it first
    reaches TARGET - HALF (the last step logged if it never does), both by
    batch_science.steps_to_target; when no logged step falls inside, the step nearest the
    crossing of TARGET. None when the curve never reaches TARGET + HALF."""
    start = bs.steps_to_target(records, target + half)
    if start is None:
        return None
    steps = [r for r in records if isinstance(r.get("gns_trace"), (int, float)) and
             isinstance(r.get("gns_g2"), (int, float)) and "step" in r and
             math.isfinite(r["gns_trace"]) and math.isfinite(r["gns_g2"])]
    if not steps:
        return None
    end = bs.steps_to_target(records, target - half)
    if end is None:
        end = max(r["step"] for r in steps)
    eps = 1e-9 * max(1.0, end)  # a crossing at 95.00000000000001 includes step 95
    inside = [r for r in steps if start - eps <= r["step"] <= end + eps]
    if not inside:
        at = bs.steps_to_target(records, target)
        at = start if at is None else at
        inside = [min(steps, key=lambda r: abs(r["step"] - at))]
    return (float(sum(r["gns_trace"] for r in inside)),
            float(sum(r["gns_g2"] for r in inside)), len(inside))


def pooled_b_simple(runs, target, half=LOSS_HALF_WINDOW):
    """(B_simple, runs, steps): the sum of the window traces over the sum of the window |G|^2
    over RUNS (the finished ones with a window); (None, 0, 0) when none has one."""
    trace = g2 = 0.0
    n_runs = n_steps = 0
    for r in runs:
        if r["summary"].get("status") != "finished":
            continue
        w = window_sums(r["records"], target, half)
        if w is None:
            continue
        trace, g2 = trace + w[0], g2 + w[1]
        n_runs, n_steps = n_runs + 1, n_steps + w[2]
    if n_runs == 0 or g2 <= 0:
        return None, 0, 0
    return trace / g2, n_runs, n_steps


def b_simple_table(runs, arm, target):
    """{G: (B_simple, runs, steps)} at TARGET over every run of ARM at each G."""
    out = {}
    for g in sorted({r["g"] for r in runs if r["arm"] == arm}):
        out[g] = pooled_b_simple([r for r in runs if r["arm"] == arm and r["g"] == g], target)
    return out


def rolling_b_simple(records, width=51):
    """(tokens, B_simple) of the ratio of centred rolling means of the raw per-step estimates
    over WIDTH steps (for the figure; the EMA would carry early spikes for hundreds of steps)."""
    pts = [(float(r["tokens"]), float(r["gns_trace"]), float(r["gns_g2"])) for r in records
           if isinstance(r.get("gns_trace"), (int, float)) and
           isinstance(r.get("gns_g2"), (int, float)) and "tokens" in r]
    if len(pts) < width:
        return [], []
    t, tr, g2 = (np.asarray(x) for x in zip(*pts))
    kernel = np.ones(width) / width
    num, den = np.convolve(tr, kernel, "valid"), np.convolve(g2, kernel, "valid")
    half = width // 2
    ok = den > 0
    return list(t[half:len(t) - half][ok]), list((num / np.where(ok, den, 1))[ok])


# ---- the report's section ----

def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def bcrit_text(b):
    if b["bcrit"] is None:
        return "not every G reached it" + (f" (G = {', '.join(map(str, b['missing']))} did not)"
                                           if b["missing"] else "")
    if b["verdict"] == "above":
        return f"> {b['value']} (beyond the largest G; fit {b['bcrit']:.3g})"
    if b["verdict"] == "below":
        return f"< {b['value']} (below the smallest G; fit {b['bcrit']:.3g})"
    return f"{b['bcrit']:.1f}"


def _axes_of(arm):
    """{key: value} of an arm_label's key=value parts."""
    return dict(part.split("=", 1) for part in arm.split()[1:] if "=" in part)


def one_axis_pairs(arms):
    """(arm a, arm b, key) for the pairs of ARMS of one optimizer that differ in one axis only."""
    out = []
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            if a.split()[0] != b.split()[0]:
                continue
            xa, xb = _axes_of(a), _axes_of(b)
            diff = [k for k in set(xa) | set(xb) if xa.get(k) != xb.get(k)]
            if len(diff) == 1:
                out.append((a, b, diff[0]))
    return out


def section_lines(name, runs, lad, target, study, bigram=None):
    """The REPORT.md lines (and bcrit_vs_target.png) of B_crit(L), B_simple(L), their ratio,
    B_crit's exponent against the tokens to target, and the arms that differ in one axis.
    BIGRAM: the val split's bigram loss (the targets run past it)."""
    arms = [a for a, pts in sorted(lad.items()) if len(pts) >= 2]
    targets = targets_past(target, bigram)
    # Past the grid, only the targets some run of an arm reached (a corpus whose bigram lies far
    # below what the study trains to adds no rows of "not reached").
    while len(targets) > len(target_grid(target)) and not any(
            r["arm"] in arms and run_steps(r, targets[-1]) is not None for r in runs):
        targets.pop()
    results, noise, draws, medians = {}, {}, {}, {}
    for i, arm in enumerate(arms):
        results[arm] = [bcrit_at(runs, arm, t) for t in targets]
        noise[arm] = {t: b_simple_table(runs, arm, t) for t in targets}
        # Independent streams per arm: a comparison of two arms does not pair their draws.
        draws[arm] = joint_draws(runs, arm, targets, seed=TARGET_SEED + 1 + i)
        for t in targets:
            bsim = [v[0] for v in noise[arm][t].values() if v[0] is not None]
            medians[arm, t] = float(np.median(bsim)) if bsim else None
    below = "" if bigram is None else \
        f"; * marks a target below the val split's bigram loss, {bigram:.4f}"
    lines = ["## Critical batch as a function of the target", "",
             f"B_crit(L) at {len(targets)} targets from {targets[0]:g} to {targets[-1]:g} nats "
             f"(the study's {target:g} among them{below}), on the same runs. Per G: every LR's "
             "runs (sweep and finals pooled), the LR with the fewest mean steps to L among those "
             "whose every run reached it; the fit of S(G) = Smin + Emin/G to those points. "
             f"Interval: {TARGET_RESAMPLES} bootstrap resamples (fixed seed) that resample every "
             "LR's runs (a one-run LR: its steps times a log deviation drawn from the LRs with "
             "several runs), re-pick each G's LR and refit; 95% percentile. \"LR re-picked\": the "
             "share of resamples whose LR differs from the point's at some G. The minimum over "
             "one-run LRs is biased low (the luckiest seed wins), which the interval does not "
             "remove. B_simple / B_crit: the median over G of B_simple(L) (next section) over "
             "B_crit(L), its interval from B_crit's alone (B_simple's own noise is left out); "
             f"McCandlish et al. predict it within [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}].", ""]
    if not arms:
        return lines + ["No arm has two Gs: no fit.", ""]
    lines += ["| arm | target L | B_crit (sequences) | 95% CI | Smin (steps) | Emin (sequences) "
              "| LR re-picked | B_simple(L), median over G | B_simple / B_crit | 95% CI | "
              f"within [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}] |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = {}
    for arm in arms:
        for b in results[arm]:
            # A bound (B_crit outside the Gs tried) has no interval worth printing.
            resolved = b["verdict"] == "value"
            ci = f"[{b['low']:.1f}, {b['high']:.1f}]" if b["low"] is not None and resolved \
                else "-"
            med = medians[arm, b["target"]]
            ratio = med / b["bcrit"] if med is not None and resolved else None
            r_lo = med / b["high"] if ratio is not None and b["high"] else None
            r_hi = med / b["low"] if ratio is not None and b["low"] else None
            verdict = ratio_verdict(ratio, r_lo, r_hi)
            verdicts.setdefault(arm, []).append(verdict)
            mark = " (the study's)" if abs(b["target"] - target) < 1e-9 else ""
            mark += " *" if bigram is not None and b["target"] < bigram else ""
            repicked = "-" if b["repicked"] is None else f"{100 * b['repicked']:.0f}%"
            r_ci = "-" if r_lo is None or r_hi is None else f"[{r_lo:.2f}, {r_hi:.2f}]"
            lines.append(f"| {arm} | {b['target']:g}{mark} | {bcrit_text(b)} | {ci} | "
                         f"{_fmt(b['smin'])} | {_fmt(b['emin'], 0)} | "
                         f"{repicked} | "
                         f"{_fmt(med)} | {_fmt(ratio, 2)} | {r_ci} | {verdict} |")
    lines.append("")
    for arm in arms:
        v = [x for x in verdicts[arm] if x != "-"]
        lines.append(f"- {arm}: B_simple / B_crit {ratio_summary(v, len(targets))}.")
    lines.append("")
    lines += exponent_lines(arms, results, draws, runs)
    lines += comparison_lines(arms, results, draws, targets)
    lines += ["### Gradient noise scale at each target", "",
              "B_simple(L) per G: the sum of the raw per-step tr(Sigma) estimates over the sum of "
              "the raw |G|^2 estimates (metrics.jsonl gns_trace, gns_g2; sequences), over the "
              f"steps at which each run's eval curve lies within +-{LOSS_HALF_WINDOW:g} nats of "
              "L, pooled over every finished run of that G (runs, steps in brackets). Not the "
              "logged b_simple, a 0.95 EMA that carries an early gradient spike for ~200 steps.",
              ""]
    for arm in arms:
        gs = sorted({g for t in targets for g in noise[arm][t]})
        lines += [f"{arm}:", "", "| target L | " + " | ".join(f"G = {g}" for g in gs) + " |",
                  "|---|" + "---|" * len(gs)]
        for t in targets:
            cells = []
            for g in gs:
                v, n_runs, n_steps = noise[arm][t].get(g, (None, 0, 0))
                cells.append("-" if v is None else f"{v:.1f} ({n_runs}, {n_steps})")
            lines.append(f"| {t:g} | " + " | ".join(cells) + " |")
        lines.append("")
    png = plot(name, results, noise, study / "bcrit_vs_target.png")
    lines += [f"![B_crit and B_simple vs target]({png})", "",
              "Points: B_crit(L) with its 95% bootstrap interval (only where the ladder of Gs "
              "straddles it); line: the median over G of B_simple(L); dots: B_simple(L) per G.",
              ""]
    return lines


def ratio_summary(verdicts, n_targets):
    """One line on how many targets put B_simple / B_crit within the band."""
    if not verdicts:
        return f"not measured at any of the {n_targets} targets (no resolved B_crit)"
    within = sum(v == "within" for v in verdicts)
    edge = sum(v.startswith("within,") for v in verdicts)
    out = sum(v == "outside" for v in verdicts)
    text = (f"within [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}] with its whole interval at {within} "
            f"of the {len(verdicts)} targets with a resolved B_crit (of {n_targets})")
    if edge:
        text += f", within by its point but not its interval at {edge}"
    if out:
        text += f", outside with its whole interval at {out}"
    rest = len(verdicts) - within - edge - out
    if rest:
        text += f", outside by its point with an interval reaching in at {rest}"
    return text


def exponent_lines(arms, results, draws, runs):
    """The fit of ln B_crit against ln (tokens to target) per arm."""
    lines = ["### B_crit against the tokens to target", "",
             "Per arm: the least-squares slope of ln B_crit(L) against ln (Emin(L) x seq_len), "
             "the fewest tokens that reach L (the small-batch limit of the fit), over the targets "
             "whose B_crit lies within the Gs tried. Zhang et al. find the critical batch "
             "growing with the data a run has seen; a slope of 0 means it does not. Interval: "
             f"{TARGET_RESAMPLES} draws of the runs shared by every target (a lucky seed is lucky "
             "at each), each target refitted with its LR re-picked; 95% percentile over the draws "
             "with 3 resolved targets or more. B_crit = Emin / Smin shares Emin with the abscissa, "
             "so their noise is correlated; the draws carry that correlation into the interval.",
             "", "| arm | targets fitted | slope | 95% CI | draws kept | B_crit at 1M tokens "
             "to target (sequences) | slope on the targets every arm resolves | 95% CI |",
             "|---|---|---|---|---|---|---|---|"]
    # Arms resolve different targets (a slow G misses the lowest): the slope on the targets
    # they share compares them on one range.
    common = set.intersection(*[{b["target"] for b in results[a] if b["verdict"] == "value"}
                                for a in arms])
    for arm in arms:
        seq = next(r["seq_len"] for r in runs if r["arm"] == arm)
        e = bcrit_exponent(results[arm], draws[arm], seq)
        if e is None:
            lines.append(f"| {arm} | fewer than 3 | - | - | - | - | - | - |")
            continue
        ci = "-" if e["low"] is None else f"[{e['low']:.2f}, {e['high']:.2f}]"
        at_1m = math.exp(e["intercept"] + e["slope"] * math.log(1e6))
        c = bcrit_exponent(results[arm], draws[arm], seq, common)
        c_text = "-" if c is None else f"{c['slope']:.2f} ({c['n']} targets)"
        c_ci = "-" if c is None or c["low"] is None else f"[{c['low']:.2f}, {c['high']:.2f}]"
        lines.append(f"| {arm} | {e['n']} | {e['slope']:.2f} | {ci} | {e['kept']} of "
                     f"{len(draws[arm])} | {at_1m:.1f} | {c_text} | {c_ci} |")
    return lines + [""]


def comparison_lines(arms, results, draws, targets):
    """B_crit(L) of arm b over arm a for the arms that differ in one axis, with the interval of
    the ratio over independent draws of the two."""
    pairs = one_axis_pairs(arms)
    if not pairs:
        return []
    lines = ["### Arms that differ in one axis", "",
             "B_crit(L) of the second arm over the first's at each target where both are "
             "resolved; 95% percentile interval of the ratio over the two arms' joint bootstrap "
             "draws, drawn independently (the arms share seeds, so this is conservative). An "
             "interval that excludes 1 says the axis moves the critical batch at that target.",
             "", "| first arm | second arm | axis | " +
             " | ".join(f"L = {t:g}" for t in targets) + " |",
             "|---|---|---|" + "---|" * len(targets)]
    for a, b, key in pairs:
        cells = []
        for k, t in enumerate(targets):
            ra, rb = results[a][k], results[b][k]
            if ra["verdict"] != "value" or rb["verdict"] != "value":
                cells.append("-")
                continue
            ratios = [db[t][0] / da[t][0] for da, db in zip(draws[a], draws[b])
                      if da[t] is not None and db[t] is not None]
            ci = "" if len(ratios) < 20 else \
                " [{:.2f}, {:.2f}]".format(*np.percentile(ratios, [2.5, 97.5]))
            cells.append(f"{rb['bcrit'] / ra['bcrit']:.2f}{ci}")
        lines.append(f"| {a} | {b} | {key} | " + " | ".join(cells) + " |")
    return lines + [""]


def plot(name, results, noise, out):
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for i, (arm, rows) in enumerate(sorted(results.items())):
        color = f"C{i}"
        pts = [b for b in rows if b["verdict"] == "value"]
        if pts:
            t = np.array([b["target"] for b in pts])
            v = np.array([b["bcrit"] for b in pts])
            lo = np.array([b["low"] if b["low"] is not None else b["bcrit"] for b in pts])
            hi = np.array([b["high"] if b["high"] is not None else b["bcrit"] for b in pts])
            ax.errorbar(t, v, yerr=[np.maximum(v - lo, 0), np.maximum(hi - v, 0)], fmt="o-",
                        color=color, capsize=3, label=f"{arm}: B_crit(L), 95% CI")
        med_t, med_v = [], []
        for t, by_g in sorted(noise[arm].items()):
            vals = [x[0] for x in by_g.values() if x[0] is not None]
            ax.plot([t] * len(vals), vals, ".", color=color, alpha=0.4)
            if vals:
                med_t.append(t)
                med_v.append(float(np.median(vals)))
        if med_t:
            ax.plot(med_t, med_v, "--", color=color, label=f"{arm}: B_simple(L), median over G")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("target val loss L (nats/token; lower to the right)")
    ax.set_ylabel("sequences")
    ax.set_title(f"{name}: critical batch and noise scale vs target", fontsize=9)
    ax.legend(fontsize=7)
    return figures.save_figure(fig, out)
