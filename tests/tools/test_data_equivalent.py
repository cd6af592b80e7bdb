#!/usr/bin/python3
"""scripts/data_equivalent.py against values computed by hand. Run by ctest (DataEquivalent),
about 2 s.

A baseline whose mean loss is L(D) = 4 (D / 1000)^-0.1 exactly, at D = 1000, 2000, 4000 tokens,
with a per-seed factor c = 0.95, 1.00, 1.08 on every cell (seeds 1-3, the same in every arm, as
the finals have them):
- the fit through the means is ln L = ln 4 + 0.1 ln 1000 - 0.1 ln D + ln(mean c), so b = 0.1;
- "fast" loses at each budget and seed what the baseline loses with twice the tokens at that
  seed: L(2D) c. Its speedup is 2 at every budget, and in every bootstrap resample, because a
  resample draws the seeds once for every cell (the means scale by the same mean c): interval
  [2.00x, 2.00x]. A draw per cell would spread it;
- "fading" is L(2 x 1000) c, L(1.5 x 2000) c, L(4000) c: speedups 2, 1.5, 1. The slope of
  ln s on log2 D over (0, ln 2), (1, ln 1.5), (2, 0) is (0 - ln 2) / 2 (equal spacing), a factor
  2^-0.5 = 0.7071 per doubling, the same in every resample: "shrinks";
- fast's loss at 4000 is L(8000) c, below the baseline's lowest mean: "extrapolated";
- a second family (model.n_embd = 64) where "fast" is 1.5x everywhere: geometric means 2 and 1.5,
  ratio 0.75 in every resample: "smaller".
Inversion by hand: a fit (ln 3, 0.5) reaches L = 1.5 at exp((ln 3 - ln 1.5) / 0.5) = 4 tokens.
"""
import math
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import data_equivalent as de  # noqa: E402

FAILURES = []
SELECT = ["optim.name", "model.n_embd", "train.max_tokens"]
C = {"1": 0.95, "2": 1.00, "3": 1.08}


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def law(d):
    return 4.0 * (d / 1000.0) ** -0.1


def arm(opt, width, d, loss_of_seed, wall=False):
    seeds = {s: loss_of_seed(s) for s in C}
    return {"axes": {"optim.name": opt, "model.n_embd": width, "train.max_tokens": str(d)},
            "wall_clock": wall, "seeds": seeds, "mean": sum(seeds.values()) / len(seeds)}


def final_arms():
    arms = {}
    fading = {1000: 2.0, 2000: 1.5, 4000: 1.0}
    for d in (1000, 2000, 4000):
        for width, fast in (("32", 2.0), ("64", 1.5)):
            arms[f"adamw_{width}_{d}"] = arm("adamw", width, d, lambda s, d=d: law(d) * C[s])
            arms[f"fast_{width}_{d}"] = arm("fast", width, d,
                                            lambda s, d=d, f=fast: law(f * d) * C[s])
        arms[f"fading_32_{d}"] = arm("fading", "32", d,
                                     lambda s, d=d: law(fading[d] * d) * C[s])
    arms["adamw_wall"] = arm("adamw", "32", 1000, lambda s: 9.0, wall=True)  # not a budget
    return arms


def main():
    a, b = de.fit_power_law([1000, 2000, 4000], [law(1000), law(2000), law(4000)])
    check(close(b, 0.1) and close(a, math.log(4) + 0.1 * math.log(1000)), f"fit {a}, {b}")
    check(close(de.equivalent_tokens((math.log(3), 0.5), 1.5), 4.0), "inversion")
    check(de.equivalent_tokens((1.0, -0.1), 1.5) is None, "a fit that rises inverts to None")
    check(de.fit_power_law([1000, 1000], [3.0, 2.9]) is None, "one budget: no fit")

    arms = final_arms()
    fams = de.families(arms, SELECT, "adamw")
    check(sorted(fams) == [(("model.n_embd", "32"),), (("model.n_embd", "64"),)],
          f"families {sorted(fams)}")
    small = fams[(("model.n_embd", "32"),)]
    check(sorted(small["base"]) == [1000.0, 2000.0, 4000.0], "the wall-clock arm is no budget")
    check(de.families(arms, ["optim.name", "model.n_embd"], "adamw") == {},
          "no budget in select: no section")

    est = de.family_estimates(small, arms, ["1", "2", "3"])
    check(close(est["fit"][1], 0.1), f"fit through the means: b {est['fit'][1]}")
    for d, want in ((1000, 2.0), (2000, 2.0), (4000, 2.0)):
        check(close(est["speedup"]["fast"][d], want), f"fast at {d}: {est['speedup']['fast'][d]}")
    for d, want in ((1000, 2.0), (2000, 1.5), (4000, 1.0)):
        check(close(est["speedup"]["fading"][d], want),
              f"fading at {d}: {est['speedup']['fading'][d]}")
    check(close(de.budget_trend(est["speedup"]["fading"]), 2 ** -0.5), "fading's trend")
    check(close(de.budget_trend(est["speedup"]["fast"]), 1.0), "fast's trend")

    boot = de.bootstrap(small, arms, resamples=200)
    low, high = de.percentile_interval([r["speedup"]["fast"][2000] for r in boot])
    check(close(low, 2.0) and close(high, 2.0), f"paired resamples keep fast at 2x: {low}, {high}")
    low, high = de.percentile_interval([de.budget_trend(r["speedup"]["fading"]) for r in boot])
    check(close(high, 2 ** -0.5) and de.trend_word(low, high) == "shrinks", f"trend {low} {high}")

    with tempfile.TemporaryDirectory() as tmp:
        lines = de.report_lines(Path(tmp), arms, SELECT, "adamw", "test", "toy")
        text = "\n".join(lines)
        check((Path(tmp) / "data_equivalent.png").exists(), "the figure is written")
    check("## Data-equivalent speedup" in text, "section title")
    check("| fast | 2000 |" in text and "| 2.00x | [2.00x, 2.00x] |" in text, "fast's row")
    fast_4000 = next((l for l in lines if l.startswith("| fast | 4000 |")), "")
    check(fast_4000.endswith("| extrapolated |"), f"fast at 4000 is extrapolated: {fast_4000}")
    check("| fading | 0.71x | [0.71x, 0.71x] | shrinks |" in text, "fading shrinks")
    check("| fast | 2.00x | 1.50x | 0.75x [0.75x, 0.75x] smaller |" in text,
          "across families: fast's ratio")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("data_equivalent: all checks passed")


main()
