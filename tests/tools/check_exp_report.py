#!/usr/bin/python3
"""Checks an experiment report (scripts/exp/exp_global_batch.sh, scripts/exp/exp_optimizers.sh) against
its runs, independently of the code that wrote it:

    tests/tools/check_exp_report.py EXP_OUT

- REPORT.md states the size, command, machine and date, and every figure it links exists;
- every table is complete: each row has a cell per column, none empty (except `chosen`) and none
  nan / None / inf;
- every cell of a known column in a row that names its runs (`runs` column) equals what the
  runs' summary.json, metrics.jsonl (or metrics.jsonl.gz, as published) and config.toml give, to the precision printed (half a unit
  of the last digit shown): steps, tokens, final val loss (mean), seed spread (max - min),
  tokens/s (mean), train s (mean), lr (config.toml's optim.lr), calibrated tokens/s (tokens per
  step over the lower quartile of the step times after the first 5), state bytes/param (optimizer-state peaks / params), optim ms (the mean of the
  log's per-step optim_ms), peak MB and peak act MB (the ledger's total and activation peaks),
  ckpt MB (the last checkpoint's files on disk; summary.json's ckpt_bytes where the checkpoints
  were not kept, as in a published copy), warmup steps and accum (config.toml), the loss
  differences (max over shared steps) and `Δ vs first row`;
- in a table with a `Δ vs X (same G)` column (the global batch's scaling and large-batch
  tables): each row's cell is its mean final val loss minus that of the row of the same
  `global batch` whose `rule` or `optimizer` is X, and `beyond seed spread` says yes exactly
  where that gap exceeds the larger seed spread of the two rows; `n/a` only where a run of
  either row has no summary.json (diverged);
- the calibration table's `tokens it became` is what the optimizer's wall-clock runs (wall_OPT_*)
  trained on, and `budget asked s` x its calibrated tokens/s rounded down to whole steps;
- every run directory appears in some table; a row reported as diverged has a run without
  summary.json.
Exits non-zero with one line per disagreement.
"""
import gzip
import json
import math
import os
import re
import sys
import tomllib

errors = []


def err(msg):
    errors.append(msg)


def tolerance(text):
    """Half a unit of the last digit printed in `text` (plus float slack)."""
    t = text.strip().lstrip("+-")
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?", t)
    if not m:
        return None
    decimals = len(m.group(2) or "")
    exp = int(m.group(3) or 0)
    return 0.5 * 10 ** (exp - decimals) * 1.0001 + 1e-12


class Run:
    def __init__(self, root, name):
        self.name, self.dir = name, os.path.join(root, "runs", name)
        path = os.path.join(self.dir, "summary.json")
        self.summary = json.load(open(path)) if os.path.exists(path) else None
        path = os.path.join(self.dir, "metrics.jsonl")
        if not os.path.exists(path) and os.path.exists(path + ".gz"):  # a published copy
            f = gzip.open(path + ".gz", "rt")
        else:
            f = open(path)
        with f:
            self.records = [json.loads(line) for line in f if line.strip()]
        with open(os.path.join(self.dir, "config.toml"), "rb") as f:
            self.config = tomllib.load(f)

    def losses(self):
        return {r["step"]: r["loss"] for r in self.records if "loss" in r}


def max_diff(runs):
    curves = [r.losses() for r in runs]
    steps = set(curves[0]).intersection(*curves[1:])
    return max(max(c[s] for c in curves) - min(c[s] for c in curves) for s in steps)


def calibrated(run):
    steps = [r for r in run.records if "loss" in r][5:]
    per_step = steps[0]["tokens"] / steps[0]["step"]
    times = sorted(r["step_ms"] for r in steps)
    lower_quartile = times[int(0.25 * (len(times) - 1))]
    return per_step * 1000.0 / lower_quartile


def state_bpp(run):
    mem = run.summary["mem"]
    return sum(v["peak"] for k, v in mem.items() if k.startswith("optim.")) / run.summary["params"]


def optim_ms(run):
    steps = [r["optim_ms"] for r in run.records if "loss" in r]
    return sum(steps) / len(steps)


def ckpt_bytes(run):
    root = os.path.join(run.dir, "ckpt")
    if not os.path.isdir(root):
        return run.summary["ckpt_bytes"]
    last = os.path.join(root, sorted(d for d in os.listdir(root) if d.startswith("step_"))[-1])
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(last) for f in fs)


def expected(column, runs, cache):
    """The value a known column must hold for these runs, or None for other columns."""
    s = [r.summary for r in runs]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    if column in ("steps", "tokens"):
        vals = {x[column] for x in s}
        if len(vals) != 1:
            err(f"{[r.name for r in runs]}: {column} differs between the runs: {sorted(vals)}")
        return s[0][column]
    simple = {"final val loss": lambda: mean([x["final_val_loss"] for x in s]),
              "seed spread": lambda: max(x["final_val_loss"] for x in s) -
              min(x["final_val_loss"] for x in s),
              "tokens/s": lambda: mean([x["mean_tokens_per_s"] for x in s]),
              "train s": lambda: mean([x["train_s"] for x in s]),
              "calibrated tokens/s": lambda: mean([calibrated(r) for r in runs]),
              "state bytes/param": lambda: mean([state_bpp(r) for r in runs]),
              "max abs loss diff between the runs": lambda: max_diff(runs),
              "optim ms": lambda: mean([optim_ms(r) for r in runs]),
              "peak MB": lambda: mean([x["mem"]["total"]["peak"] for x in s]) / 1e6,
              "peak act MB": lambda: mean([x["mem"]["activations"]["peak"] for x in s]) / 1e6,
              "ckpt MB": lambda: mean([ckpt_bytes(r) for r in runs]) / 1e6}
    if column in simple:
        return simple[column]()
    m = re.fullmatch(r"(max abs loss diff|abs final val diff) vs (\S+)", column)
    if m:
        ref = cache(m.group(2))
        if m.group(1) == "max abs loss diff":
            return max(max_diff([r, ref]) for r in runs)
        return max(abs(x["final_val_loss"] - ref.summary["final_val_loss"]) for x in s)
    return None


def tables(text):
    """Markdown tables as (header, rows of cells)."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = (cells, [])
                out.append(cur)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return out


def check_row(header, cells, runs_of, first_val):
    row = dict(zip(header, cells))
    names = [n.strip() for n in row["runs"].split(",")]
    runs = [runs_of(n) for n in names]
    if any(r is None for r in runs):
        return None
    if row.get("final val loss") == "diverged":  # a run of the row stopped on a non-finite loss
        if all(r.summary is not None for r in runs):
            err(f"{row['runs']}: reported as diverged but every run has a summary.json")
        return None
    for r in runs:
        if r.summary is None or r.summary.get("status") != "finished":
            err(f"{r.name}: no finished summary.json")
            return None
    for col, cell in row.items():
        if col in ("warmup steps", "accum"):
            section, key = {"warmup steps": ("optim", "warmup_steps"),
                            "accum": ("train", "accum")}[col]
            for r in runs:
                if str(r.config[section][key]) != cell:
                    err(f"{r.name}: {col} {cell} but config.toml has {r.config[section][key]}")
            continue
        if col == "tokens it became":
            check_became(row, runs[0], runs_of)
            continue
        if col == "lr":
            for r in runs:
                if not math.isclose(float(cell), r.config["optim"]["lr"], rel_tol=1e-9):
                    err(f"{r.name}: lr {cell} but config.toml has {r.config['optim']['lr']}")
            continue
        if col == "Δ vs first row":  # the first row's own difference is 0
            mine = sum(r.summary["final_val_loss"] for r in runs) / len(runs)
            want = mine - (mine if first_val is None else first_val)
        else:
            want = expected(col, runs, runs_of)
        if want is None:
            continue
        tol = tolerance(cell)
        if tol is None or abs(float(cell) - want) > tol:
            err(f"{','.join(names)}: column '{col}' says {cell}, the runs give {want:.6g}")
    return sum(r.summary["final_val_loss"] for r in runs) / len(runs)


def check_became(row, calib, runs_of):
    """A calibration row's `tokens it became` (see the docstring)."""
    root = os.path.dirname(calib.dir)
    opt = row["optimizer"]
    walls = [runs_of(n) for n in sorted(os.listdir(root))
             if n.startswith(f"wall_{opt}_s") and os.path.isdir(os.path.join(root, n))]
    if not walls:
        err(f"{calib.name}: no wall_{opt}_* runs for its tokens it became")
    for w in walls:
        if w is not None and w.summary is not None and w.summary["tokens"] != int(row["tokens it became"]):
            err(f"{w.name}: trained on {w.summary['tokens']} tokens, the calibration says "
                f"{row['tokens it became']}")
    steps = [r for r in calib.records if "loss" in r]
    per_step = steps[0]["tokens"] / steps[0]["step"]
    room = float(row["budget asked s"]) * calibrated(calib) - int(row["tokens it became"])
    if not -(float(row["budget asked s"]) * 0.1 + 1) <= room < per_step * 1.001:
        err(f"{calib.name}: {row['tokens it became']} tokens is not {row['budget asked s']} s at "
            f"{calibrated(calib):.1f} tokens/s in whole steps of {per_step:g}")


def check_same_g(header, rows, runs_of):
    """The `Δ vs X (same G)` and `beyond seed spread` cells of a table (see the docstring)."""
    col = next((h for h in header if re.fullmatch(r"Δ vs \S+ \(same G\)", h)), None)
    if col is None:
        return
    ref_name = re.fullmatch(r"Δ vs (\S+) \(same G\)", col).group(1)
    key = "rule" if "rule" in header else "optimizer"
    dicts = [dict(zip(header, c)) for c in rows if len(c) == len(header)]

    def finals(row):
        runs = [runs_of(n.strip()) for n in row["runs"].split(",")]
        if any(r is None or r.summary is None for r in runs):
            return None
        return [r.summary["final_val_loss"] for r in runs]

    for row in dicts:
        refs = [d for d in dicts if d[key] == ref_name and d["global batch"] == row["global batch"]]
        if len(refs) != 1:
            err(f"{row['runs']}: {len(refs)} rows of {ref_name} at G = {row['global batch']}")
            continue
        mine, ref = finals(row), finals(refs[0])
        if mine is None or ref is None:
            if row[col] != "n/a" or row["beyond seed spread"] != "n/a":
                err(f"{row['runs']}: a run of it or of its {ref_name} row diverged, but "
                    f"'{col}' says {row[col]} and 'beyond seed spread' {row['beyond seed spread']}")
            continue
        d = sum(mine) / len(mine) - sum(ref) / len(ref)
        tol = tolerance(row[col])
        if tol is None or abs(float(row[col]) - d) > tol:
            err(f"{row['runs']}: column '{col}' says {row[col]}, the runs give {d:+.6f}")
        yard = max(max(mine) - min(mine), max(ref) - min(ref))
        want = "yes" if abs(d) > yard else "no"
        if row["beyond seed spread"] != want:
            err(f"{row['runs']}: 'beyond seed spread' says {row['beyond seed spread']}, but the "
                f"gap is {d:+.6f} against a seed spread of {yard:.6f}")


def main():
    root = sys.argv[1]
    text = open(os.path.join(root, "REPORT.md")).read()
    for needle in ("- Size: **", "- Command: `", "- Machine: ", "- Date: "):
        if needle not in text:
            err(f"REPORT.md lacks '{needle}'")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    if not images:
        err("REPORT.md links no figure")
    for img in images:
        p = os.path.join(root, img)
        if not os.path.exists(p) or os.path.getsize(p) == 0:
            err(f"figure {img} is missing or empty")
    loaded, seen = {}, set()

    def runs_of(name):
        if name not in loaded:
            if not os.path.isdir(os.path.join(root, "runs", name)):
                err(f"a table names run {name}, which does not exist")
                loaded[name] = None
            else:
                loaded[name] = Run(root, name)
        seen.add(name)
        return loaded[name]

    for header, rows in tables(text):
        for cells in rows:
            if len(cells) != len(header):
                err(f"row {cells[:2]}: {len(cells)} cells for {len(header)} columns")
                continue
            for col, cell in zip(header, cells):
                if (not cell and col != "chosen") or cell.lower() in ("nan", "none", "inf", "-inf"):
                    err(f"row {cells[:2]}: column '{col}' is '{cell}'")
        if "runs" in header:
            first = None
            for cells in rows:
                if len(cells) == len(header):
                    v = check_row(header, cells, runs_of, first)
                    first = v if first is None else first
            check_same_g(header, rows, runs_of)
    for name in sorted(os.listdir(os.path.join(root, "runs"))):
        if os.path.isdir(os.path.join(root, "runs", name)) and name not in seen:
            err(f"run {name} appears in no table")
    for e in errors:
        print(f"check_exp_report: {root}: {e}")
    if errors:
        sys.exit(1)
    print(f"check_exp_report: {root}: {len(seen)} runs, every table cell agrees")


if __name__ == "__main__":
    main()
