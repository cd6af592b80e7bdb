#!/usr/bin/python3
"""scripts/study_report.py's statistics against values computed by hand, and its report on a
synthetic study directory (manifest, summaries, evaluations and logs written here, no training):
the arms' intervals, the paired comparison with Holm's correction, the winner only where a
corrected interval excludes 0, and unstable or failed runs kept out and listed. Run by ctest
(StudyReportStatistics); takes about 2 s.

Hand computations (t quantiles: t(0.975, 3) = 3.182446305, t(0.975, 2) = 4.302652730):
- [1, 2, 3, 4]: mean 2.5, sd sqrt(5/3) = 1.2909944, se 0.6454972, half 3.1824463 * 0.6454972
  = 2.0542603: [0.4457397, 4.5542603].
- arm [1.5, 2.1, 3.6] - base [1.0, 2.0, 3.0] = d [0.5, 0.1, 0.6]: mean 0.4, sd sqrt(0.07) =
  0.2645751, se 0.1527525, half 4.3026527 * 0.1527525 = 0.6572411: [-0.2572411, 1.0572411];
  t = 0.4 / 0.1527525 = 2.6186147, and with 2 degrees of freedom the two-sided
  p = 1 - t / sqrt(2 + t^2) = 1 - 2.6186147 / 2.9760952 = 0.1201170.
- Holm on p = [0.01, 0.04, 0.03] (m = 3): ranks 0, 2, 1; 3 * 0.01 = 0.03, 2 * 0.03 = 0.06,
  max(0.06, 1 * 0.04) = 0.06: adjusted [0.03, 0.06, 0.06].
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


check_statistics()
check_report()
for f in failures:
    print("FAIL:", f)
print("study_report statistics:", "FAILED" if failures else "all checks passed")
sys.exit(1 if failures else 0)
