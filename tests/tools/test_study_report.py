#!/usr/bin/python3
"""scripts/study_report.py's statistics against values computed by hand, and its report on a
synthetic study directory (manifest, summaries, evaluations and logs written here, no training):
the arms' intervals, the paired comparison with Holm's correction, the winner only where a
corrected interval excludes 0, and unstable or failed runs kept out and listed. Run by ctest
(StudyReportStatistics); takes about 8 s.

Hand computations (t quantiles: t(0.975, 3) = 3.182446305, t(0.975, 2) = 4.302652730):
- [1, 2, 3, 4]: mean 2.5, sd sqrt(5/3) = 1.2909944, se 0.6454972, half 3.1824463 * 0.6454972
  = 2.0542603: [0.4457397, 4.5542603].
- arm [1.5, 2.1, 3.6] - base [1.0, 2.0, 3.0] = d [0.5, 0.1, 0.6]: mean 0.4, sd sqrt(0.07) =
  0.2645751, se 0.1527525, half 4.3026527 * 0.1527525 = 0.6572411: [-0.2572411, 1.0572411];
  t = 0.4 / 0.1527525 = 2.6186147, and with 2 degrees of freedom the two-sided
  p = 1 - t / sqrt(2 + t^2) = 1 - 2.6186147 / 2.9760952 = 0.1201170.
- Holm on p = [0.01, 0.04, 0.03] (m = 3): ranks 0, 2, 1; 3 * 0.01 = 0.03, 2 * 0.03 = 0.06,
  max(0.06, 1 * 0.04) = 0.06: adjusted [0.03, 0.06, 0.06].

A study with [finals] (check_finals_report, a fake directory: a toy corpus, sweep runs, finals on
three token-budget and wall-clock groups), by hand:
- Data: V = 2, train [0 0 0 1], val [0 1 0], test [1 1 0]. Add-one unigram p = [4/6, 2/6]: on
  test (2 ln 3 + ln 1.5) / 3 = 0.8675632, on val (2 ln 1.5 + ln 3) / 3 = 0.6365142. Bigram with
  prior 1 (train's tail has no pair to choose it on): c(0,0) = 2, c(0,1) = 1, c(0) = 3, c(1) = 0;
  p(1|1) = (0 + 1/3) / 1 = 1/3, p(0|1) = (0 + 2/3) / 1 = 2/3, p(1|0) = (1 + 1/3) / 4 = 1/3, so on
  test (ln 3 + ln 1.5) / 2 = 0.7520387, on val the same pairs (0,1), (1,0): 0.7520387.
  ln V = 0.6931472.
- Finals losses on test between the val unigram (0.6365) and the test unigram (0.8676) for the
  wall-clock arms: kept only if the floor is taken on the reported split.
- Each group: lion - adamw = [-0.05, -0.04, -0.05]: mean -0.0466667, sd 0.0057735, se
  0.0033333, t = -14, p = 1 - 14 / sqrt(198) = 0.0050633; one comparison per group, so Holm
  leaves it at 0.005 (Holm over the two token groups together would give 0.010).
- Tokens to target (group 1000), against adamw's median seed: the seeds' curves are the arm's
  curve + 0.01 x (k - 1), k = 0, 1, 2, so the median seed is k = 1, ending at 0.9 (the target,
  reached at its last point, 1000 tokens). Lion's seeds cross 0.9 between 600 and 800 tokens at
  600 + (0.95 + 0.01 (k - 1) - 0.9) x 200 / 0.1 = 680, 700, 720: median 700, speedup
  1000 / 700 = 1.43x. Bootstrap: a resample's median seed is k = 0 (or k = 2) with probability
  P(2 or 3 of 3 draws are it) = 7/27, so the extreme pair (baseline k, lion k) has probability
  49/729 = 6.7% > 2.5% and the percentile interval is the extreme speedups: target 0.89 (base k
  = 0), lion's median k = 2 crossing at 600 + 0.07 x 2000 = 740: 1000 / 740 = 1.35x; target 0.91,
  lion's k = 0 at 600 + 0.03 x 2000 = 660: 1000 / 660 = 1.52x. Group 2000: lion's curve stays
  above 0.7: not reached.
- Clopper-Pearson, 95%: 0 of 3: [0, 1 - 0.025^(1/3)] = [0, 0.7075982]; 1 of 2: [1 - sqrt(0.975),
  sqrt(0.975)] = [0.0125791, 0.9874209]; 3 of 3: [0.025^(1/3), 1] = [0.2924018, 1].
- Detectable effect, 3 pairs, Holm over 9: t(1 - 0.05 / 18, 2) / sqrt(3); with 2 degrees of
  freedom t(p) = q sqrt(2 / (1 - q^2)), q = 2p - 1 = 1 - 0.05 / 9: 13.3604 / 1.7320508 = 7.7136544.
- Provenance: runs that record one clean commit pass; a dirty build, two commits (also within one
  run: summary and first metrics record disagree after a resume), or some runs with a commit and
  some without are refused with one line and exit 1, nothing written, unless --allow-dirty or
  --allow-mixed-builds, which mark the report at its top; runs that record no build (published
  before ledgerlm recorded it) are marked PROVENANCE UNKNOWN, not refused. The report program's
  own dirty flag counts its scripts only (check_program_version).
- Cost (lion, 9 runs): optimizer 1.0 ms, step 1.8 s * 1000 / 100 = 18 ms (wall runs 14.4 s / 800
  steps = 18 ms), share 1 / 18 = 5.6%, state 4000 bytes / 1000 params = 4.00.
- Wall clock: 15 s asked; 15.9 s is +6.0% (out), 15.7 s +4.7% (in), 14.2 s -5.3% (out), 14.3 s
  -4.7% (in). Load: 2 cores, start loads 1.6 (mean above 1.5: out) or 1.4 (in).
"""
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import study_report as sr  # noqa: E402

# Hand values carry 7 decimals: agreement within 1e-6 is agreement to the last digit written.
TOL = 1e-6
failures = []


def close(what, got, want, tol=TOL):
    if got is None or abs(got - want) > tol:
        failures.append(f"{what}: got {got}, want {want} (tolerance {tol})")


def check_statistics():
    mean, lo, hi = sr.t_interval([1, 2, 3, 4])
    close("t interval mean", mean, 2.5)
    close("t interval low", lo, 0.4457397)
    close("t interval high", hi, 4.5542603)
    _, lo1, hi1 = sr.t_interval([3.0])
    if lo1 is not None or hi1 is not None:
        failures.append("one value has no interval")
    d = sr.paired_difference({1: 1.5, 2: 2.1, 3: 3.6, 9: 7.0}, {1: 1.0, 2: 2.0, 3: 3.0})
    if d["n"] != 3:
        failures.append(f"paired on the common seeds: n {d['n']}, want 3")
    close("paired mean", d["mean"], 0.4)
    close("paired low", d["low"], -0.2572411)
    close("paired high", d["high"], 1.0572411)
    close("paired p", d["p"], 0.1201170)
    adjusted, ranks = sr.holm([0.01, 0.04, 0.03])
    for i, want in enumerate([0.03, 0.06, 0.06]):
        close(f"holm[{i}]", adjusted[i], want, 1e-12)
    if ranks != [0, 2, 1]:
        failures.append(f"holm ranks {ranks}, want [0, 2, 1]")
    # The verdict: only a corrected-significant improvement wins.
    comps = {"a": {"mean": -0.2, "p_holm": 0.01}, "b": {"mean": -0.5, "p_holm": 0.2}}
    if sr.verdict(comps, "base") != "a":
        failures.append("verdict: a (significant) should win over b (not significant)")
    if sr.verdict({"b": {"mean": -0.5, "p_holm": 0.2}}, "base") is not None:
        failures.append("verdict: nothing significant must give no winner")
    if sr.verdict({"b": {"mean": 0.5, "p_holm": 0.01}}, "base") != "base":
        failures.append("verdict: the baseline wins when every arm is significantly worse")
    for args, want in [(("finished", 5.0, 3.0, 4.0), "ok"),
                       (("failed", 5.0, None, 4.0), "failed"),
                       (("finished", 5.0, 5.5, 6.0), "unstable"),
                       (("finished", 5.0, 4.5, 4.0), "failed (never beat")]:
        if not sr.classify(*args).startswith(want):
            failures.append(f"classify{args}: {sr.classify(*args)}, want {want}...")


def write_run(study, name, axes, status, losses, final):
    d = study / "runs" / name
    d.mkdir(parents=True)
    summary = {"status": status, "steps": len(losses), "tokens": 1000, "params": 100,
               "final_val_loss": final}
    (d / "summary.json").write_text(json.dumps(summary))
    if final is not None:
        (d / "study_eval.json").write_text(json.dumps({"full_val_loss": final}))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, "loss": l}) + "\n"
                                             for i, l in enumerate(losses)))
    (d / "config.toml").write_text('[data]\ndir = "/nonexistent"\n')
    return {"name": name, "axes": axes, "overrides": {}, "world": 1}


def check_report():
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp)
        runs = []
        # Baseline A and arm B, 3 seeds: B is lower by 0.5 +- 0.01 on every seed.
        for seed, (a, b) in enumerate([(3.0, 2.5), (3.2, 2.71), (3.1, 2.59)], start=1):
            runs.append(write_run(study, f"A_seed{seed}", {"optim.name": "A", "train.seed":
                                                            str(seed)}, "finished", [5, 4], a))
            runs.append(write_run(study, f"B_seed{seed}", {"optim.name": "B", "train.seed":
                                                            str(seed)}, "finished", [5, 4], b))
        # C: one run whose loss rose above its start, one that diverged.
        runs.append(write_run(study, "C_seed1", {"optim.name": "C", "train.seed": "1"},
                              "finished", [5, 9], 6.0))
        runs.append(write_run(study, "C_seed2", {"optim.name": "C", "train.seed": "2"},
                              "failed", [5], None))
        (study / "manifest.json").write_text(json.dumps(
            {"format": 1, "name": "synthetic", "baseline": "A", "config": "", "runs": runs}))
        text = sr.report(str(study)).read_text()
        for want in ["**Winner: B**", "| C_seed1 | unstable", "| C_seed2 | failed",
                     "whole val split", "| A | 3 | 3.1000 |"]:
            if want not in text:
                failures.append(f"report lacks {want!r}:\n{text}")
        # B - A = [-0.5, -0.49, -0.51]: mean -0.5, sd 0.01, se 0.0057735, half
        # 4.3026527 * 0.0057735 = 0.0248414.
        if "| B | 3 | -0.5000 | [-0.5248, -0.4752] |" not in text:
            failures.append(f"report's paired row for B is not the hand value:\n{text}")
        # One seed of B only: one pair, no test, no winner.
        for seed in (2, 3):
            (study / "runs" / f"B_seed{seed}" / "summary.json").unlink()
        text = sr.report(str(study)).read_text()
        if "**No winner at this n**" not in text:
            failures.append(f"with one pair the report names a winner:\n{text}")


# ---- robustness over seeds (seed_robustness.py) ----

def check_seed_robustness():
    import seed_robustness as rb
    # The rise above the running minimum: 6.26 -> 5.1 then 6.84 is a rise of 1.74 at index 3;
    # a later lower value does not undo it; a NaN is skipped.
    rise, at = rb.largest_rise([6.26, 5.5, 5.1, 6.84, float("nan"), 5.0, 5.3])
    close("largest rise", rise, 1.74)
    if at != 3:
        failures.append(f"largest rise at {at}, want 3")
    if rb.largest_rise([3.0, 2.0, 1.0]) != (0.0, None):
        failures.append("a falling loss has no rise")
    # 20% trimmed mean: 8 values lose 1 from each end (floor 1.6): mean(2..7) = 4.5; 10 values
    # lose 2: mean(3..8) = 5.5.
    close("trimmed mean of 8", rb.trimmed_mean([1, 2, 3, 4, 5, 6, 7, 100]), 4.5)
    close("trimmed mean of 10", rb.trimmed_mean(list(range(1, 11))), 5.5)
    # Embedding-group LR: AdamW lr x multiplier; Muon its AdamW group's LR x multiplier.
    close("adamw embedding lr", rb.embedding_lr({"optim": {"name": "adamw", "lr": 8e-3,
                                                           "lr_mult_embedding": 0.25}}), 2e-3)
    close("muon embedding lr", rb.embedding_lr({"optim": {"name": "muon", "lr": 2e-2,
                                                          "muon_adamw_lr": 2e-3}}), 2e-3)
    # One setting, 5 seeds: seeds 3 and 5 spike (rise 1.5 > 1 nat; seed 4 rises 0.9: not a
    # spike), seed 5 then failed. Kept losses [3.0, 3.1, 3.4, 3.05]: median 3.075, trimmed
    # (floor(0.8) = 0 cut) = mean 3.1375; spiked kept [3.4] minus calm [3.0, 3.1, 3.05] median
    # 3.05: spike cost 0.35; spike steps (index + 1) [3, 3] for seeds 3 and 5.
    calm, spiky, almost = [6.0, 5.0, 4.5], [6.0, 5.0, 6.5], [6.0, 5.0, 5.9]
    runs = [{"loss": 3.0, "kept": True, "train_losses": calm, "seed": 1},
            {"loss": 3.1, "kept": True, "train_losses": calm, "seed": 2},
            {"loss": 3.4, "kept": True, "train_losses": spiky, "seed": 3},
            {"loss": 3.05, "kept": True, "train_losses": almost, "seed": 4},
            {"loss": None, "kept": False, "train_losses": spiky, "seed": 5}]
    st = rb.setting_stats(runs)
    if (st["n"], st["spiked"], st["kept"]) != (5, 2, 4):
        failures.append(f"setting stats counts {st['n'], st['spiked'], st['kept']}, want 5 2 4")
    close("median", st["median"], 3.075)
    close("trimmed", st["trimmed"], 3.1375)
    close("mean", st["mean"], 3.1375)
    close("spike cost", st["spike_cost"], 0.35)
    if st["spike_steps"] != [3, 3]:
        failures.append(f"spike steps {st['spike_steps']}, want [3, 3]")
    # Matched pairs and the paired rows: muon (embedding 2e-3, warmup 30) pairs with the AdamW
    # setting at 8e-3 x 0.25, not with the one at another warmup or LR. Differences
    # [0.5, 0.1, 0.6] as in check_statistics: mean 0.4 [-0.2572411, 1.0572411], p 0.1201170,
    # median 0.5; the second pair [-0.1, -0.3]: t = -2, 1 df, p = 1 - 2 atan(2) / pi
    # = 0.2951672; Holm: the smaller p x 2 = 0.2402340, the larger max(that, 0.2951672)).
    settings = {
        "muon_a": {"optim": "muon", "embedding_lr": 2e-3, "warmup": 30,
                   "seeds": {1: 1.5, 2: 2.1, 3: 3.6}},
        "muon_b": {"optim": "muon", "embedding_lr": 8e-3, "warmup": 30,
                   "seeds": {1: 0.9, 2: 0.7}},
        "adamw_x": {"optim": "adamw", "embedding_lr": 2e-3, "warmup": 30,
                    "seeds": {1: 1.0, 2: 2.0, 3: 3.0}},
        "adamw_y": {"optim": "adamw", "embedding_lr": 2e-3, "warmup": 150,
                    "seeds": {1: 1.0, 2: 2.0, 3: 3.0}},
        "adamw_z": {"optim": "adamw", "embedding_lr": 8e-3, "warmup": 30,
                    "seeds": {1: 1.0, 2: 1.0}},
    }
    pairs = rb.matched_pairs(settings, "adamw")
    if pairs != [("muon_a", "adamw_x"), ("muon_b", "adamw_z")]:
        failures.append(f"matched pairs {pairs}")
    rows = {r["setting"]: r for r in rb.paired_rows(settings, pairs)}
    close("paired mean", rows["muon_a"]["mean"], 0.4)
    close("paired low", rows["muon_a"]["low"], -0.2572411)
    close("paired high", rows["muon_a"]["high"], 1.0572411)
    close("paired p", rows["muon_a"]["p"], 0.1201170)
    close("paired median", rows["muon_a"]["median"], 0.5)
    close("second p", rows["muon_b"]["p"], 0.2951672)
    close("holm first", rows["muon_a"]["p_holm"], 0.2402340)
    close("holm second", rows["muon_b"]["p_holm"], 0.2951672)
    # The section in a report: a study of 5 seeds per setting has it, with the spike rate; a
    # 3-seed study (check_report) has not.
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp)
        entries = []
        for seed in range(1, 6):
            losses = [5, 6.5, 4] if seed == 2 else [5, 4.5, 4]
            entries.append(write_run(study, f"A_seed{seed}", {"optim.name": "A", "train.seed":
                                                               str(seed)}, "finished", losses,
                                     3.0 + 0.01 * seed))
        (study / "manifest.json").write_text(json.dumps(
            {"format": 1, "name": "synthetic", "baseline": "A", "config": "", "runs": entries}))
        text = sr.report(str(study)).read_text()
        for want in ["## Robustness over seeds", "| A | 0 | 5 | 1/5 (20%, [1%, 72%]) | 2 | "
                     "3.0300 | 3.0300 |"]:
            if want not in text:
                failures.append(f"robustness report lacks {want!r}:\n{text}")


# ---- a study with [finals] ----

def write_shard(path, ids):
    """Token shard format 2 as the reader wants it: magic, version 2, width 2, the count at bytes
    16-24, then the ids (checksum fields and table left zero: the report does not read them)."""
    head = b"LLMTOKS1" + (2).to_bytes(4, "little") + (2).to_bytes(4, "little")
    head += len(ids).to_bytes(8, "little") + bytes(8)
    path.write_bytes(head + b"".join(int(i).to_bytes(2, "little") for i in ids))


def write_data(root):
    data = root / "data"
    data.mkdir()
    splits = {"train": [0, 0, 0, 1], "val": [0, 1, 0], "test": [1, 1, 0]}
    for split, ids in splits.items():
        write_shard(data / f"{split}.bin", ids)
    meta = {"vocab_size": 2, "token_width": 2, "val_fraction": 0.1, "test_fraction": 0.05}
    meta.update({k: {"tokens": len(v), "bytes": len(v)} for k, v in splits.items()})
    (data / "meta.json").write_text(json.dumps(meta))
    return data


def write_full_run(study, data, entry, summary, study_eval, curve=()):
    d = study / "runs" / entry["name"]
    d.mkdir(parents=True)
    base = {"status": "finished", "steps": 100, "tokens": 1000, "params": 1000, "wall_s": 3.0,
            "train_s": 1.0, "final_val_loss": study_eval["full_val_loss"]}
    (d / "summary.json").write_text(json.dumps({**base, **summary}))
    (d / "study_eval.json").write_text(json.dumps(study_eval))
    lines = [{"step": 1, "loss": 5.0}] + [{"step": 10 * (i + 1), "tokens": t, "val_loss": v,
                                           "wall_s": 0.1 * i} for i, (t, v) in enumerate(curve)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (d / "config.toml").write_text(f'[data]\ndir = "{data}"\n')
    return entry


def finals_study(study, wall_train_s=(15.0, 15.0, 15.0), load=0.2):
    """The fake study of the hand computations in the module comment; returns its directory."""
    data = write_data(study)
    runs, lrs = [], {"adamw": ["0.001", "0.002", "0.004"], "lion": ["0.0001", "0.0002", "0.0004"]}
    best = {"adamw": 0.004, "lion": 0.0002}
    for opt in ("adamw", "lion"):
        for lr in lrs[opt]:
            for wd in (["0", "0.1"] if opt == "adamw" else ["1"]):
                for tokens in ("1000", "2000"):
                    for seed in (1, 2):
                        # 0.5 + 0.01 per octave from the best LR, +0.005 without decay, -0.02 at
                        # the larger budget, +0.003 for lion, +0.001 per seed.
                        loss = (0.5 + 0.01 * abs(math.log2(float(lr) / best[opt])) +
                                (0.005 if wd == "0" else 0) - (0.02 if tokens == "2000" else 0) +
                                (0.003 if opt == "lion" else 0) + 0.001 * seed)
                        name = f"{opt}_lr{lr}_weight-decay{wd}_max-tokens{tokens}_seed{seed}"
                        axes = {"optim.name": opt, "optim.lr": lr, "optim.weight_decay": wd,
                                "train.max_tokens": tokens, "train.seed": str(seed)}
                        runs.append(write_full_run(study, data, {"name": name, "axes": axes},
                                                   {"tokens": int(tokens)},
                                                   {"full_val_loss": loss, "split": "val"}))
    arms, seeds = {}, [101, 102, 103]
    test_loss = {("adamw", "1000"): [0.70, 0.72, 0.71], ("lion", "1000"): [0.65, 0.68, 0.66],
                 ("adamw", "2000"): [0.60, 0.62, 0.61], ("lion", "2000"): [0.55, 0.58, 0.56],
                 ("adamw", "wall"): [0.80, 0.82, 0.81], ("lion", "wall"): [0.75, 0.78, 0.76]}
    curves = {("adamw", "1000"): [2.0, 1.5, 1.2, 1.0, 0.9], ("lion", "1000"): [1.8, 1.3, 0.95,
                                                                              0.85, 0.8],
              ("adamw", "2000"): [2.0, 1.4, 1.0, 0.8, 0.7], ("lion", "2000"): [2.1, 1.6, 1.2,
                                                                              0.9, 0.75]}
    cost = {"adamw": {"mean_optim_ms": 1.5, "optim.": ["optim.m", "optim.v"]},
            "lion": {"mean_optim_ms": 1.0, "optim.": ["optim.m"]}}
    for opt in ("adamw", "lion"):
        wd = "0.1" if opt == "adamw" else "1"
        for budget in ("1000", "2000", "wall"):
            tokens = "1000" if budget == "wall" else budget
            setting = f"{opt}_lr{best[opt]:g}_weight-decay{wd}_max-tokens{tokens}"
            arm = f"{opt}_max-tokens{tokens}" + ("_wall15s" if budget == "wall" else "")
            if budget != "wall":
                arms[arm] = {"from": setting, "selection_loss": 0.5015 - (0.02 if tokens ==
                             "2000" else 0) + (0.003 if opt == "lion" else 0), "settings": 9,
                             "axes": {"optim.name": opt, "train.max_tokens": tokens}}
            for k, seed in enumerate(seeds):
                axes = {"optim.name": opt, "optim.lr": f"{best[opt]:g}", "optim.weight_decay": wd,
                        "train.max_tokens": tokens, "train.seed": str(seed)}
                entry = {"name": f"final_{arm}_seed{seed}", "axes": axes, "phase": "final",
                         "arm": arm, "from": setting}
                mem = {name: {"current": 4000, "peak": 4000, "predicted": 4000,
                              "location": "host"} for name in cost[opt]["optim."]}
                mem["params"] = {"current": 4000, "peak": 4000, "predicted": 4000,
                                 "location": "host"}
                mem["total"] = {"peak": 50000}
                summary = {"tokens": int(tokens), "steps": 100, "train_s": 1.8 + (0.2 if opt ==
                           "adamw" else 0) + 0.1 * (k - 1), "mean_optim_ms":
                           cost[opt]["mean_optim_ms"], "mem": mem, "ckpt_bytes": 12000,
                           "weights_bytes": 4000, "mean_tokens_per_s": 5000.0}
                ev = {"full_val_loss": 0.5, "full_test_loss": test_loss[(opt, budget)][k],
                      "split": "test"}
                if budget == "wall":
                    entry["wall_clock"] = True
                    train_s = wall_train_s[k] if opt == "adamw" else 14.4
                    summary.update(tokens=1500, steps=800, train_s=train_s)
                    ev.update(seconds_asked=15.0, loadavg_start=[load, 0.3, 0.3],
                              loadavg_end=[0.5, 0.4, 0.3])
                curve = [(200.0 * (i + 1), v + 0.01 * (k - 1))
                         for i, v in enumerate(curves.get((opt, budget), []))]
                runs.append(write_full_run(study, data, entry, summary, ev, curve))
    finals = {"seeds": seeds, "select": ["optim.name", "train.max_tokens"], "split": "test",
              "wall_clock_seconds": 15.0, "arms": arms}
    (study / "manifest.json").write_text(json.dumps(
        {"format": 1, "name": "finals", "baseline": "adamw", "config": "", "runs": runs,
         "finals": finals}))
    return study


def check_pieces():
    # n-gram floors of the toy corpus (module comment).
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp))
        for split, uni, bi in (("test", 0.8675632, 0.7520387), ("val", 0.6365142, 0.7520387)):
            b = sr.ngram_baselines.baselines(data, split)
            close(f"unigram on {split}", b["unigram"], uni)
            close(f"bigram on {split}", b["bigram"], bi)
            close(f"prior weight on {split}", b["alpha"], 1.0, 0)
        close("ln V", b["ln_v"], 0.6931472)
    # Tokens to target: between points, at the first point, never.
    close("tokens to target", sr.tokens_to_target([200, 400, 600, 800, 1000],
                                                  [1.8, 1.3, 0.95, 0.85, 0.8], 0.9), 700.0)
    close("target at the first point", sr.tokens_to_target([200, 400], [0.5, 0.4], 0.9), 200.0)
    if sr.tokens_to_target([200, 400], [2.0, 1.0], 0.9) is not None:
        failures.append("a curve that stays above the target must give None")
    close("speedup", sr.speedup(1000.0, 700.0), 1000 / 700)
    if sr.speedup(None, 700.0) is not None or sr.speedup(1000.0, None) is not None:
        failures.append("speedup without both crossings must be None")
    # The mean curve: point by point over seeds, cut to the shortest.
    tokens, losses = sr.mean_curve([[(100, 3.0), (200, 2.0), (300, 1.0)], [(110, 4.0), (220, 3.0)]])
    if tokens != [105.0, 210.0] or losses != [3.5, 2.5]:
        failures.append(f"mean curve {tokens} {losses}, want [105, 210] [3.5, 2.5]")
    # Groups: one per budget, the wall-clock arms together, each with its adamw arm.
    fa = {"a1": {"axes": {"optim.name": "adamw", "train.max_tokens": "1"}, "wall_clock": False},
          "l1": {"axes": {"optim.name": "lion", "train.max_tokens": "1"}, "wall_clock": False},
          "l2": {"axes": {"optim.name": "lion", "train.max_tokens": "2"}, "wall_clock": False},
          "a2": {"axes": {"optim.name": "adamw", "train.max_tokens": "2"}, "wall_clock": False},
          "aw": {"axes": {"optim.name": "adamw", "train.max_tokens": "1"}, "wall_clock": True},
          "lw": {"axes": {"optim.name": "lion", "train.max_tokens": "2"}, "wall_clock": True}}
    groups = sr.finals_groups(fa, ["optim.name", "train.max_tokens"], "adamw")
    want = {(("train.max_tokens", "1"),): {"arms": ["a1", "l1"], "baseline": "a1"},
            (("train.max_tokens", "2"),): {"arms": ["a2", "l2"], "baseline": "a2"},
            ("wall clock",): {"arms": ["aw", "lw"], "baseline": "aw"}}
    if groups != want:
        failures.append(f"finals groups {groups}, want {want}")
    # The wall-clock rule: +-5% of the seconds asked, the start load against the cores.
    def wall(train_s, load):
        return {"name": f"r{train_s}", "summary": {"train_s": train_s},
                "eval": {"seconds_asked": 15.0, "loadavg_start": [load, 0, 0]}}
    for train_s, load, problems in ((15.7, 1.4, 0), (14.3, 1.4, 0), (15.9, 1.4, 1),
                                    (14.2, 1.4, 1), (15.0, 1.6, 1), (15.9, 1.6, 2)):
        got = sr.wall_clock_problems([wall(15.0, load), wall(train_s, load)], cores=2)
        if len(got) != problems:
            failures.append(f"wall clock {train_s} s at load {load} on 2 cores: {got}, want "
                            f"{problems} problem(s)")
    # Where the runs measured what other processes took of the CPUs, that decides, not the load
    # average (which counts the study's own previous run): mean 9% passes, mean 11% does not.
    def measured(share):
        run = wall(15.0, 1.9)
        run["eval"]["other_cpu"] = {"other_share": share}
        return run
    for shares, problems in (((0.08, 0.10), 0), ((0.10, 0.12), 1)):
        got = sr.wall_clock_problems([measured(x) for x in shares], cores=2)
        if len(got) != problems or (problems and "took 11.0% of the CPUs" not in got[0]):
            failures.append(f"wall clock with other CPU shares {shares}: {got}, want {problems}")
    # Cost: 8 bytes of optimizer state per parameter, step 20 ms of which 1.5 optimizer.
    run = {"status": "finished", "axes": {"optim.name": "adamw"}, "summary": {
        "steps": 100, "train_s": 2.0, "params": 1000, "mean_optim_ms": 1.5,
        "mem": {"optim.m": {"peak": 4000}, "optim.v": {"peak": 4000}, "params": {"peak": 4000},
                "total": {"peak": 50000}}, "ckpt_bytes": 12000, "weights_bytes": 4000,
        "mean_tokens_per_s": 5000.0}}
    c = sr.cost_rows([run, {**run, "summary": {**run["summary"], "train_s": 2.2}}])["adamw"]
    for key, want in (("step_ms", 21.0), ("optim_ms", 1.5), ("share", (1.5 / 20 + 1.5 / 22) / 2),
                      ("state_per_param", 8.0), ("peak", 50000), ("ckpt", 12000),
                      ("weights", 4000), ("tokens_per_s", 5000.0)):
        close(f"cost {key}", c[key], want)
    # The heatmap's cell: the lowest mean over the other swept axes.
    arms = {n: {"axes": {"optim.lr": lr, "optim.weight_decay": wd, "train.max_tokens": t},
                "mean": m} for n, lr, wd, t, m in
            (("a", "0.1", "0", "1", 3.0), ("b", "0.1", "0", "2", 2.0), ("c", "0.01", "0.1", "1", 1.0))}
    xs, ys, grid = sr.heatmap_grid(list(arms.values()), "optim.lr", "optim.weight_decay")
    if xs != ["0.01", "0.1"] or ys != ["0", "0.1"] or grid[0][1] != 2.0 or grid[1][0] != 1.0 \
            or not math.isnan(grid[0][0]):
        failures.append(f"heatmap grid {xs} {ys} {grid.tolist()}")


def check_seed_stats():
    ss = sr.seed_stats
    for (k, n), (lo, hi) in (((0, 3), (0.0, 0.7075982)), ((1, 2), (0.0125791, 0.9874209)),
                             ((3, 3), (0.2924018, 1.0))):
        got = ss.clopper_pearson(k, n)
        close(f"Clopper-Pearson {k}/{n} low", got[0], lo)
        close(f"Clopper-Pearson {k}/{n} high", got[1], hi)
    if ss.clopper_pearson(0, 0) != (None, None):
        failures.append("Clopper-Pearson of no runs must be (None, None)")
    close("detectable effect, 3 pairs, Holm over 9", ss.detectable_effect(3, 9), 7.7136544)
    # The median seed: the middle final loss, not the mean curve (a seed 0.3 high moves the mean).
    def curve(final, reach):  # falls linearly from 2.0 at 0 tokens to FINAL at 1000
        return [(0.0, 2.0), (1000.0, final)] if reach is None else [(0.0, 2.0), (reach, final)]
    base = [curve(1.0, None), curve(1.3, None), curve(1.1, None)]
    arm = [[(0.0, 2.0), (500.0, 1.0)]] * 3  # reaches 1.1 at 450 tokens
    sp = ss.median_seed_speedup(base, arm)
    close("median seed target", sp["target"], 1.1, 1e-12)
    close("median seed tokens", sp["base_tokens"], 1000.0, 1e-9)
    close("arm tokens to the median seed's target", sp["arm_tokens"], 450.0, 1e-9)
    close("speedup vs the median seed", sp["speedup"], 1000 / 450, 1e-12)
    # Deterministic: the same seed gives the same interval; identical arm seeds and one baseline
    # seed repeated give a zero-width interval at the point value.
    a1 = ss.bootstrap_speedup(base, arm)
    if a1 != ss.bootstrap_speedup(base, arm):
        failures.append("the speedup bootstrap is not deterministic with its fixed seed")
    flat = ss.bootstrap_speedup([curve(1.1, None)] * 3, arm)
    close("speedup interval, no spread: low", flat[0], 1000 / 450, 1e-9)
    close("speedup interval, no spread: high", flat[1], 1000 / 450, 1e-9)


def provenance_study(study, builds):
    """Three seeds of arms A and B (B 0.5 lower); BUILDS: {run name: (summary build, first
    metrics record's build)}, a build None: not recorded."""
    runs = []
    for seed, (a, b) in enumerate([(3.0, 2.5), (3.2, 2.71), (3.1, 2.59)], start=1):
        for arm, loss in (("A", a), ("B", b)):
            name = f"{arm}_seed{seed}"
            runs.append(write_run(study, name, {"optim.name": arm, "train.seed": str(seed)},
                                  "finished", [5, 4], loss))
            summary_build, first_build = builds.get(name, (None, None))
            d = study / "runs" / name
            if summary_build:
                s = json.loads((d / "summary.json").read_text())
                (d / "summary.json").write_text(json.dumps({**s, "build": summary_build}))
            if first_build:
                text = (d / "metrics.jsonl").read_text()
                (d / "metrics.jsonl").write_text(json.dumps({"step": 0, "build": first_build}) +
                                                 "\n" + text)
    (study / "manifest.json").write_text(json.dumps(
        {"format": 1, "name": "prov", "baseline": "A", "config": "", "runs": runs}))
    return study


def run_main(args):
    """study_report.main() on ARGS in this process (no interpreter start per case): (exit code,
    stderr)."""
    import contextlib
    import io
    err, argv = io.StringIO(), sys.argv
    sys.argv = ["study_report.py"] + args
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = sr.main()
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = argv
    return code, err.getvalue()


def check_provenance():
    clean = {"version": "0.1.0", "commit": "a" * 40, "dirty": False}
    other = {**clean, "commit": "b" * 40}
    dirty = {**clean, "dirty": True}
    names = [f"{arm}_seed{s}" for s in (1, 2, 3) for arm in ("A", "B")]
    everyone = {n: (clean, clean) for n in names}
    cases = [
        ("one clean build", everyone, [], 0, "- Trained by: aaaaaaaaaaaa (6 runs); clean builds"),
        ("a dirty build", {**everyone, "B_seed2": (dirty, dirty)}, [], 1,
         "ledgerlm: error: study report: 1 of 6 runs were trained by a build with uncommitted "
         "changes (first: B_seed2): commit, rebuild and run them again, or pass --allow-dirty"),
        ("a dirty build allowed", {**everyone, "B_seed2": (dirty, dirty)}, ["--allow-dirty"], 0,
         "# Study prov\n\n> **NOT A PUBLICATION OF RECORD: 1 of 6 runs were trained by a build "
         "with uncommitted changes** (written with --allow-dirty)"),
        ("two commits", {**everyone, "A_seed3": (other, other)}, [], 1,
         "ledgerlm: error: study report: the runs were trained by different builds (aaaaaaaaaaaa "
         "(5 runs), bbbbbbbbbbbb (1 runs)): run them again with one build, or pass "
         "--allow-mixed-builds"),
        ("a resume by another build", {**everyone, "A_seed1": (clean, other)}, [], 1,
         "the runs were trained by different builds (aaaaaaaaaaaa (6 runs), bbbbbbbbbbbb "
         "(1 runs))"),
        ("some runs without a build", {n: everyone[n] for n in names[:4]}, [], 1,
         "(aaaaaaaaaaaa (4 runs), none recorded (2 runs))"),
        ("two commits allowed", {**everyone, "A_seed3": (other, other)},
         ["--allow-mixed-builds"], 0,
         "> **NOT A PUBLICATION OF RECORD: the runs come from different builds** (aaaaaaaaaaaa"),
        ("no build recorded", {}, [], 0,
         "> **PROVENANCE UNKNOWN: 6 of 6 runs record no build commit** (trained before ledgerlm "
         "recorded it"),
    ]
    for what, builds, flags, code, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            study = provenance_study(Path(tmp), builds)
            returncode, stderr = run_main([str(study)] + flags)
            report = study / "REPORT.md"
            got = stderr if code else (report.read_text() if report.is_file() else "")
            if returncode != code:
                failures.append(f"provenance, {what}: exit {returncode}, want {code} "
                                f"({stderr.strip()})")
            elif want not in got:
                failures.append(f"provenance, {what}: lacks {want!r}:\n{got[:600]}")
            if code and (report.exists() or len(stderr.strip().splitlines()) != 1 or
                         any(study.glob("*.png"))):
                failures.append(f"provenance, {what}: a refusal must write nothing and say one "
                                f"line: {stderr!r}")
            if not code and "PROVENANCE UNKNOWN" in got and builds:
                failures.append(f"provenance, {what}: runs with a build are not unknown")


def check_program_version():
    """The report program's commit and dirty flag look at its own scripts/ only: a results file
    changed in the same checkout (the report just written) does not make it dirty, an edited
    script does."""
    import shutil
    import subprocess
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        shutil.copytree(Path(sr.__file__).parent, repo / "scripts",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (repo / "results").mkdir()
        (repo / "results" / "REPORT.md").write_text("old\n")
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)

        def version():
            return subprocess.run(
                [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                 "import study_report; print(study_report.version())", str(repo / "scripts")],
                capture_output=True, text=True).stdout.strip()
        (repo / "results" / "REPORT.md").write_text("new\n")
        if "uncommitted" in version():
            failures.append(f"a changed results file marks the report program dirty: {version()}")
        with open(repo / "scripts" / "figures.py", "a") as f:
            f.write("# edited\n")
        if "uncommitted" not in version():
            failures.append(f"an edited script must mark the report program dirty: {version()}")


def check_finals_report():
    with tempfile.TemporaryDirectory() as tmp:
        study = finals_study(Path(tmp))
        text = sr.report(str(study), cores=2).read_text()
        wants = [
            # Header: 36 sweep + 18 final runs of 3 s; budgets; splits; floors on test.
            "- Runs: 54 x 3.0 s mean wall time per run; total 162.0 s of run wall time",
            "| final | train.max_tokens = 1000 | 6 | 1000 | 1000 | 1.00 | 250.000 |",
            "| final | wall clock 15.0 s | 6 | 1500 | 1000 | 1.50 | 375.000 |",
            "val = the last 10% of each document", "test = 5% of each document",
            "val for the sweep, which selects, test for the finals, which are reported",
            "Floors on the test split (counted on train): unigram 0.8676, bigram 0.7520 "
            "(smoothed towards the unigram, prior weight 1",
            "ln V 0.6931",
            # Selection: the plan's loss beside the mean of the chosen setting's sweep runs.
            "| adamw_max-tokens1000 | adamw_lr0.004_weight-decay0.1_max-tokens1000 | 0.5015 | "
            "0.5015 (2) | 9 |",
            "| lion_max-tokens2000 | lion_lr0.0002_weight-decay1_max-tokens2000 | 0.4845 | "
            "0.4845 (2) | 9 |",
            "optim.name=adamw, optim.weight_decay=0.1, train.max_tokens=1000: the best LR "
            "(0.004, `adamw_lr0.004_weight-decay0.1_max-tokens1000`) is the highest of its sweep",
            "![adamw: optim.lr x optim.weight_decay (best over train.max_tokens)](heatmap_adamw_",
            # Finals per group: lion - adamw, Holm within the group.
            "### train.max_tokens = 1000\n", "### train.max_tokens = 2000\n", "### wall clock\n",
            "| lion_max-tokens1000 | 3 | -0.0467 | [-0.0610, -0.0323] | 0.005 | 0.005 | "
            "[-0.0610, -0.0323] at 95.00% |",
            "| lion_max-tokens2000 | 3 | -0.0467 | [-0.0610, -0.0323] | 0.005 | 0.005 |",
            "**Winner: lion_max-tokens1000**", "**Winner: lion_max-tokens2000**",
            "**Winner: lion_max-tokens1000_wall15s**",
            "| adamw_max-tokens1000_wall15s | 3 | 0.8100 |",
            # Tokens to target and speedup.
            "the final eval-window val loss of `adamw_max-tokens1000`'s median seed (the seed "
            "with the median final loss), 0.9000, which that seed first reaches at 1000 tokens",
            "| lion_max-tokens1000 | 3/3 | 700 | 1.43x | [1.35x, 1.52x] |",
            # The baseline's seed k = 2 ends at 0.91, above its median seed's target.
            "| adamw_max-tokens1000 | 2/3 | 1000 | 1.00x (reference) | - |",
            "| lion_max-tokens2000 | 0/3 | not reached | - | - |",
            # Failure rate: no final failed; 0 of 3 still allows 71%.
            "| lion_max-tokens1000 | 3 | 0.6633 | [0.6254, 0.7013] | 1.00 | 0/3 (0%, [0%, 71%]) |",
            "## Failure rate per optimizer (sweep)", "| adamw | 0/24 (0%, [0%, 14%]) |",
            # Cost of lion: every final run at 18 ms a step.
            "| lion | 9 | 1.000 | 18.000 | 5.6% | 4.00 | 50000 | 12000 | 4000 | 5000 |",
            "| final_lion_max-tokens1000_wall15s_seed101 | 15.00 | 14.40 | -4.0% | - | "
            "0.20/0.30/0.30 | 0.50/0.40/0.30 |",
        ]
        for want in wants:
            if want not in text:
                failures.append(f"finals report lacks {want!r}")
        at = [text.find(h) for h in ("### train.max_tokens = 1000", "### train.max_tokens = 2000",
                                     "### wall clock")]
        if sorted(at) != at:
            failures.append(f"groups out of order (budgets by value, wall clock last): {at}")
        if "| lion_max-tokens1000 | 3 | -0.0467 | [-0.0610, -0.0323] | 0.005 | 0.010" in text:
            failures.append("Holm ran over both token groups together")
        for png in ("lr_sensitivity.png", "finals_val_curves.png",
                    "heatmap_adamw_optim.lr_optim.weight_decay.png",
                    "heatmap_lion_optim.lr_train.max_tokens.png"):
            if not (study / png).is_file():
                failures.append(f"finals report wrote no {png}")
        if "Runs kept out\n\nNone." not in text.replace("## ", ""):
            failures.append("finals on test between the val and test unigram must be kept")
    # A wall-clock run 6% over the seconds asked: the statistics' winner is not named.
    with tempfile.TemporaryDirectory() as tmp:
        text = sr.report(str(finals_study(Path(tmp), (15.0, 15.9, 15.0))), cores=2).read_text()
        for want in ["**No winner named** (the statistics would say: Winner: "
                     "lion_max-tokens1000_wall15s), because:",
                     "final_adamw_max-tokens1000_wall15s_seed102 trained 15.90 s of 15 s asked "
                     "(+6.0%, outside +-5%)", "**Winner: lion_max-tokens2000**"]:
            if want not in text:
                failures.append(f"wall clock 15.9 s: report lacks {want!r}")
    # A loaded machine (start load 1.6 > 2 cores - 0.5): no winner either.
    with tempfile.TemporaryDirectory() as tmp:
        text = sr.report(str(finals_study(Path(tmp), load=1.6)), cores=2).read_text()
        if "the mean 1-minute load average at the start was 1.60, above 2 cores - 0.5" not in text:
            failures.append("a loaded machine must veto the wall-clock winner")


check_statistics()
check_report()
check_pieces()
check_finals_report()
check_seed_stats()
check_provenance()
check_program_version()
check_seed_robustness()
for f in failures:
    print("FAIL:", f)
print("study_report statistics:", "FAILED" if failures else "all checks passed")
sys.exit(1 if failures else 0)
