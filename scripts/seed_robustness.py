"""Robustness over seeds, for scripts/study_report.py: per setting of a study trained on many
seeds, how often a run spikes, and its loss as the median, a trimmed mean and the mean; then
optimizers compared pair by pair at a matched embedding-group LR. tests/tools/test_study_report.py
checks it against hand values.

Why: with three seeds, one run that spikes at the end of warmup and ends 0.3 nats high moves an
arm's mean and decides a comparison; a setting that is good on most seeds but spikes on some is
a different finding from one that is uniformly worse. The median and the trimmed mean say what
a typical run reaches, the spike rate (with its exact interval) how often the failure happens.

A spike: the training loss rises more than SPIKE_NATS above the lowest training loss the run
has logged before (per-step losses from metrics.jsonl). 1 nat is far above the step-to-step noise
of these runs (a few tenths at 16 x 64 tokens per step) and below the rises seen at the end of
warmup (6.26 -> 6.84-7.02 after the loss had fallen to ~5.1).

Matched embedding LR: an AdamW-family optimizer's embedding group trains at optim.lr x
optim.lr_mult_embedding; Muon's at optim.muon_adamw_lr x optim.lr_mult_embedding (its 2-D
weights at optim.lr). Comparing Muon with AdamW at unequal embedding LRs confounds the two.
"""
import math

import numpy as np
from scipy import stats

import seed_stats

SPIKE_NATS = 1.0
TRIM = 0.2  # trimmed from each end: 1 of 8 seeds, 2 of 10
SEED = "train.seed"
OPTIM = "optim.name"
WARMUP = "optim.warmup_steps"
MIN_SEEDS = 5  # below this a median or a spike rate per setting says little


def largest_rise(losses):
    """The largest rise of LOSSES (per-step, in step order) above the lowest value before it:
    (rise in nats, index where it peaks); non-finite values are skipped. (0.0, None) when the
    losses never rise."""
    low, rise, at = math.inf, 0.0, None
    for i, x in enumerate(losses):
        if not math.isfinite(x):
            continue
        if x - low > rise:
            rise, at = x - low, i
        low = min(low, x)
    return rise, at


def trimmed_mean(values, proportion=TRIM):
    """The mean after cutting floor(PROPORTION x n) values from each end (scipy's trim_mean)."""
    return float(stats.trim_mean(values, proportion)) if len(values) else None


def embedding_lr(config):
    """The peak LR of the embedding group from a run's full config (config.toml as a dict)."""
    optim = config.get("optim", {})
    mult = float(optim.get("lr_mult_embedding", 1.0))
    if optim.get("name") == "muon":
        return float(optim.get("muon_adamw_lr", 0.0)) * mult
    return float(optim.get("lr", 0.0)) * mult


def setting_stats(runs):
    """RUNS: one setting's runs (dicts with "loss" (None for a failed run), "kept" (bool),
    "train_losses" (per step), "seed"). The spike count and what the kept runs' losses give."""
    spikes = []
    for r in runs:
        rise, at = largest_rise(r["train_losses"])
        spikes.append((rise > SPIKE_NATS or r["loss"] is None, rise, at))
    kept = [r["loss"] for r in runs if r["kept"] and r["loss"] is not None]
    spiked_losses = [r["loss"] for r, s in zip(runs, spikes) if s[0] and r["kept"]]
    calm_losses = [r["loss"] for r, s in zip(runs, spikes) if not s[0] and r["kept"]]
    mean, low, high = (None, None, None)
    if len(kept) >= 2:
        mean = float(np.mean(kept))
        half = stats.t.ppf(0.975, len(kept) - 1) * np.std(kept, ddof=1) / math.sqrt(len(kept))
        low, high = mean - half, mean + half
    elif kept:
        mean = kept[0]
    return {"n": len(runs), "spiked": sum(s[0] for s in spikes),
            "kept": len(kept), "median": float(np.median(kept)) if kept else None,
            "trimmed": trimmed_mean(kept), "mean": mean, "low": low, "high": high,
            "worst": max(kept) if kept else None,
            "spike_cost": (float(np.median(spiked_losses) - np.median(calm_losses))
                           if spiked_losses and calm_losses else None),
            "spike_steps": sorted(s[2] + 1 for s in spikes if s[0] and s[2] is not None)}


def matched_pairs(settings, baseline_optim):
    """SETTINGS: {name: {"optim", "embedding_lr", "warmup", "seeds": {seed: loss}}}. For each
    setting of another optimizer, the BASELINE_OPTIM settings at the same embedding LR and warmup:
    [(setting, baseline setting)]."""
    pairs = []
    for name, s in sorted(settings.items()):
        if s["optim"] == baseline_optim:
            continue
        for bname, b in sorted(settings.items()):
            if b["optim"] == baseline_optim and b["warmup"] == s["warmup"] and \
                    math.isclose(b["embedding_lr"], s["embedding_lr"], rel_tol=1e-9):
                pairs.append((name, bname))
    return pairs


def paired_rows(settings, pairs, alpha=0.05):
    """Each pair's mean paired difference (setting - baseline, on the seeds both kept), its 95%
    t interval, p (paired t) and Holm's p over the pairs; also the median difference."""
    rows = []
    for name, bname in pairs:
        a, b = settings[name]["seeds"], settings[bname]["seeds"]
        common = sorted(set(a) & set(b))
        d = [a[k] - b[k] for k in common]
        row = {"setting": name, "baseline": bname, "n": len(d), "mean": None, "low": None,
               "high": None, "p": None, "median": float(np.median(d)) if d else None}
        if len(d) >= 2:
            m, sd = float(np.mean(d)), float(np.std(d, ddof=1))
            half = stats.t.ppf(0.975, len(d) - 1) * sd / math.sqrt(len(d))
            row.update(mean=m, low=m - half, high=m + half,
                       p=float(stats.ttest_1samp(d, 0.0).pvalue) if sd > 0 else
                       (0.0 if m != 0 else 1.0))
        elif d:
            row["mean"] = d[0]
        rows.append(row)
    tested = [r for r in rows if r["p"] is not None]
    order = sorted(range(len(tested)), key=lambda i: tested[i]["p"])
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(tested) - rank) * tested[i]["p"]))
        tested[i]["p_holm"] = running
    return rows


def fmt(x, digits=4):
    return "-" if x is None else f"{x:.{digits}f}"


def applies(runs_by_setting):
    """Whether the section is worth writing: some setting has at least MIN_SEEDS seeds."""
    return any(len(rs) >= MIN_SEEDS for rs in runs_by_setting.values())


def report_lines(runs_by_setting, baseline_optim, alpha=0.05):
    """RUNS_BY_SETTING: {setting: [run dicts as setting_stats wants, plus "config" (the full
    config dict)]}. The section's markdown lines."""
    lines = ["## Robustness over seeds", "",
             f"Per setting over its seeds: **spiked**, the runs whose training loss rose more "
             f"than {SPIKE_NATS:g} nat above the lowest it had reached (or that failed), with "
             "the exact (Clopper-Pearson) 95% interval of the rate and the steps where the "
             "rises peaked; the final loss of the kept runs as the **median**, the "
             f"{int(TRIM * 100)}% **trimmed mean** (floor({TRIM:g} n) seeds cut from each end), "
             "and the mean with its 95% t interval; **spike cost**, the median final loss of "
             "the spiked runs minus that of the others. Sorted by the median, which is what "
             "selection uses.", "",
             "| setting | embedding LR | seeds | spiked (rate, 95% CI) | spike steps | median | "
             "trimmed mean | mean [95% CI] | worst | spike cost |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    rows = {name: setting_stats(rs) for name, rs in runs_by_setting.items()}
    settings = {}
    for name, rs in runs_by_setting.items():
        cfg = rs[0]["config"]
        settings[name] = {"optim": cfg.get("optim", {}).get("name"),
                          "embedding_lr": embedding_lr(cfg),
                          "warmup": cfg.get("optim", {}).get("warmup_steps"),
                          "seeds": {r["seed"]: r["loss"] for r in rs
                                    if r["kept"] and r["loss"] is not None}}
    for name in sorted(rows, key=lambda k: (rows[k]["median"] is None, rows[k]["median"] or 0)):
        r = rows[name]
        ci = (f"{fmt(r['mean'])} [{fmt(r['low'])}, {fmt(r['high'])}]" if r["low"] is not None
              else fmt(r["mean"]))
        steps = ", ".join(str(s) for s in r["spike_steps"]) or "-"
        lines.append(f"| {name} | {settings[name]['embedding_lr']:.3g} | {r['n']} | "
                     f"{seed_stats.rate_text(r['spiked'], r['n'])} | {steps} | "
                     f"{fmt(r['median'])} | {fmt(r['trimmed'])} | {ci} | {fmt(r['worst'])} | "
                     f"{fmt(r['spike_cost'])} |")
    total_k = sum(r["spiked"] for r in rows.values())
    total_n = sum(r["n"] for r in rows.values())
    by_optim = {}
    for name, r in rows.items():
        k, n = by_optim.get(settings[name]["optim"], (0, 0))
        by_optim[settings[name]["optim"]] = (k + r["spiked"], n + r["n"])
    lines += ["", "Spike rate per optimizer over all its settings: " +
              "; ".join(f"{o} {seed_stats.rate_text(k, n)}" for o, (k, n) in
                        sorted(by_optim.items())) +
              f"; all runs {seed_stats.rate_text(total_k, total_n)}.", ""]

    pairs = matched_pairs(settings, baseline_optim)
    if pairs:
        lines += [f"### Against {baseline_optim} at a matched embedding LR", "",
                  f"Each setting of another optimizer against the {baseline_optim} settings "
                  "with the same embedding-group LR and warmup, paired by seed (setting minus "
                  f"{baseline_optim}; negative: lower loss), Holm over these comparisons. Only "
                  "the embedding group's LR is matched: the other tensors follow each "
                  "optimizer's own rule.", "",
                  "| setting | against | pairs | mean difference [95% CI] | median difference "
                  "| p | p (Holm) |", "|---|---|---|---|---|---|---|"]
        for r in paired_rows(settings, pairs, alpha):
            ci = (f"{fmt(r['mean'])} [{fmt(r['low'])}, {fmt(r['high'])}]"
                  if r["low"] is not None else fmt(r["mean"]))
            lines.append(f"| {r['setting']} | {r['baseline']} | {r['n']} | {ci} | "
                         f"{fmt(r['median'])} | {fmt(r['p'], 3)} | {fmt(r.get('p_holm'), 3)} |")
        lines.append("")
    return lines
