#!/usr/bin/python3
"""The equivalence of splits for a study whose runs share one global batch G split differently
(a `batch` axis of "WORLDxMICROxACCUM" values with one product): each split against the baseline
split on the same seed, step by step. A split computes the same step in another order of sums,
so its training loss may drift from the baseline's only by rounding that the optimizer carries
forward; the scale to judge that drift by is the spread between seeds of the baseline split.
scripts/study_report.py calls equivalence_lines() for such a study; test_batch_science.py checks
it on fabricated runs.
"""
import json
from pathlib import Path

from batch_science import read_records

TOLERANCE_OF_SEED_SPREAD = 0.1  # a split deviating by a tenth of the seed spread is a finding


def global_batch(split):
    w, m, a = (int(x) for x in split.split("x"))
    return w * m * a


def is_split_study(manifest):
    """True when the runs vary a batch axis whose values all make the same global batch."""
    splits = {r.get("axes", {}).get("batch") for r in manifest.get("runs", [])}
    if None in splits or len(splits) < 2:
        return False
    return len({global_batch(s) for s in splits}) == 1


def train_losses(records):
    """{step: training loss} from a run's step records (the summary line left out)."""
    return {int(r["step"]): float(r["loss"]) for r in records
            if "loss" in r and "step" in r and "summary" not in r}


def max_deviation(a, b):
    """(max |a - b| over the steps both logged, the step where it is), or (None, None)."""
    common = sorted(set(a) & set(b))
    if not common:
        return None, None
    step = max(common, key=lambda s: abs(a[s] - b[s]))
    return abs(a[step] - b[step]), step


def equivalence_lines(study, manifest, baseline=None):
    """The REPORT.md section: per split, its runs, final val loss, the largest per-step training
    loss deviation from the baseline split on the same seed, the final val loss deviation, the
    activations' peak and tokens/s; the baseline's seed spread and the verdict."""
    study = Path(study)
    runs = {}
    for entry in manifest["runs"]:
        d = study / "runs" / entry["name"]
        try:
            summary = json.loads((d / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        if summary.get("status") != "finished":
            continue
        records = read_records(d)
        split = entry["axes"]["batch"]
        seed = entry["axes"].get("train.seed", entry.get("overrides", {}).get("train.seed"))
        runs.setdefault(split, {})[seed] = {
            "name": entry["name"], "losses": train_losses(records),
            "val": summary.get("final_val_loss"),
            "act": summary.get("mem", {}).get("activations", {}).get("peak"),
            "tps": summary.get("mean_tokens_per_s")}
    base = (baseline or "")[1:] if (baseline or "").startswith("b") else None
    if base not in runs:
        base = min(runs, key=lambda s: (int(s.split("x")[0]), -int(s.split("x")[1])), default=None)
    if base is None:
        return ["## Equivalence of splits", "", "No finished runs yet.", ""]
    g = global_batch(base)
    lines = ["## Equivalence of splits", "",
             f"One global batch of {g} sequences split as world x micro-batch x accumulation; each "
             f"split against {base} on the same seed: the largest difference of the training "
             "loss at any step, and of the final val loss. `activations MB`: the activations' "
             "peak in rank 0's ledger (a smaller micro-batch holds fewer); tokens/s of splits "
             "with more ranks than cores say nothing about speed.", "",
             "| split | seeds | final val loss (mean) | max abs train loss diff (step) | "
             "abs final val diff | activations MB | tokens/s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    worst = (0.0, None)
    for split in sorted(runs, key=lambda s: (s != base, s)):
        seeds = runs[split]
        devs, vdiffs = [], []
        for seed, run in seeds.items():
            ref = runs[base].get(seed)
            if ref is None or split == base:
                continue
            dev, step = max_deviation(run["losses"], ref["losses"])
            if dev is not None:
                devs.append((dev, step, run["name"]))
            if run["val"] is not None and ref["val"] is not None:
                vdiffs.append(abs(run["val"] - ref["val"]))
        vals = [r["val"] for r in seeds.values() if r["val"] is not None]
        act = [r["act"] for r in seeds.values() if r["act"] is not None]
        tps = [r["tps"] for r in seeds.values() if r["tps"] is not None]
        dev = max(devs) if devs else None
        if dev and dev[0] >= worst[0]:
            worst = (dev[0], dev[2])
        lines.append(
            f"| {split} | {len(seeds)} | {sum(vals) / len(vals):.4f} | "
            + (f"{dev[0]:.2e} ({dev[1]})" if dev else "-") + " | "
            + (f"{max(vdiffs):.2e}" if vdiffs else "-") + " | "
            + (f"{sum(act) / len(act) / 1e6:.2f}" if act else "-") + " | "
            + (f"{sum(tps) / len(tps):.0f}" if tps else "-") + " |")
    # The seed spread of the baseline split: how far two seeds' curves lie apart at worst.
    spread = None
    base_runs = list(runs[base].values())
    for i in range(len(base_runs)):
        for j in range(i + 1, len(base_runs)):
            d, _ = max_deviation(base_runs[i]["losses"], base_runs[j]["losses"])
            if d is not None:
                spread = d if spread is None else max(spread, d)
    lines.append("")
    if spread is None:
        lines += ["The baseline split has one seed: no seed spread to judge the deviations by.", ""]
        return lines
    tol = TOLERANCE_OF_SEED_SPREAD * spread
    verdict = ("**every split is within it**: the splits train the same model up to the order "
               "of sums" if worst[0] <= tol else
               f"**{worst[1]} is not**: that split changes training beyond rounding")
    lines += [f"Seed spread of {base} (largest difference between two seeds' training loss at any "
              f"step): {spread:.3e} nats. Tolerance: a tenth of it, {tol:.3e}. Largest deviation "
              f"of a split from {base}: {worst[0]:.3e} nats"
              + (f" ({worst[1]})" if worst[1] else "") + f", {worst[0] / spread:.1e} of the "
              f"spread; {verdict}.", ""]
    return lines
