#!/usr/bin/python3
"""The table of scripts/compare_blocks.sh: DIR/BLOCK_seedN runs (summary.json, and eval_val.txt
from `ledgerlm eval --split val --max-windows 0`) summarised per block, printed as markdown and
written to DIR/REPORT.md.

Per block: parameters, final loss on the whole val split as the mean over seeds with its 95%
Student t interval, bits per byte (mean), training tokens/s (median over seeds; evaluations
excluded, summary.json's mean_tokens_per_s) and the peak of the tracked memory ledger
(summary.json mem.total.peak, the largest over seeds). Then llama - gpt2 and nanochat - gpt2,
paired by seed (a seed fixes the data order, the same for every block), with t intervals: a
difference is called only where its interval excludes 0.

Usage: scripts/compare_blocks_report.py DIR
"""
import json
import re
import sys
from pathlib import Path

sys.dont_write_bytecode = True
try:
    import numpy as np
    import scipy  # noqa: F401  (batch_science.t_interval uses it)
except ImportError as e:
    sys.exit(f"compare_blocks: error: the report needs numpy and scipy ({e}): "
             "apt-get install python3-numpy python3-scipy")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_science import t_interval  # noqa: E402  (the studies' Student t interval)

BLOCKS = ["gpt2", "llama", "nanochat"]
BASE = "gpt2"
EVAL_RE = re.compile(r"^loss ([0-9.eE+-]+) nats/token .*\| ([0-9.eE+-]+) bits/byte", re.M)


def read_runs(out):
    """{block: {seed: row}} for every finished, evaluated run in OUT."""
    runs = {b: {} for b in BLOCKS}
    for d in sorted(out.iterdir()):
        m = re.fullmatch(r"(\w+?)_seed(\d+)", d.name)
        if not m or m.group(1) not in runs or not d.is_dir():
            continue
        summary, evalf = d / "summary.json", d / "eval_val.txt"
        if not summary.is_file() or not evalf.is_file():
            continue
        s = json.loads(summary.read_text())
        e = EVAL_RE.search(evalf.read_text())
        if s.get("status") != "finished" or not e:
            continue
        runs[m.group(1)][int(m.group(2))] = {
            "params": s["params"], "tokens": s["tokens"], "loss": float(e.group(1)),
            "bpb": float(e.group(2)), "tps": s["mean_tokens_per_s"],
            "peak": s["mem"]["total"]["peak"], "commit": s.get("build", {}).get("commit", "?"),
            "dirty": s.get("build", {}).get("dirty", False)}
    return runs


def ci_text(mean, low, high, digits=4):
    if low is None:
        return f"{mean:.{digits}f} [n/a: 1 seed]"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def report(out):
    runs = read_runs(out)
    if not any(runs.values()):
        sys.exit(f"compare_blocks: error: {out} has no finished, evaluated run (BLOCK_seedN)")
    lines = []
    env = out / "environment.txt"
    if env.is_file():
        lines += [f"- {line}" for line in env.read_text().splitlines() if line.strip()]
    builds = sorted({(r["commit"][:7], r["dirty"]) for b in runs.values() for r in b.values()})
    lines.append("- trained by ledgerlm " + ", ".join(
        c + (" (dirty)" if dirty else "") for c, dirty in builds))
    tokens = sorted({r["tokens"] for b in runs.values() for r in b.values()})
    lines.append(f"- tokens per run: {', '.join(f'{t:,}' for t in tokens)}"
                 + ("" if len(tokens) == 1 else " (NOT EQUAL: the comparison is void)"))
    lines += ["", "| block | params | seeds | final val loss, mean [95% t CI] | val bits/byte "
              "| tokens/s (median) | peak tracked memory (MB) |", "|---|---|---|---|---|---|---|"]
    for b in BLOCKS:
        r = runs[b]
        if not r:
            lines.append(f"| {b} | - | 0 | - | - | - | - |")
            continue
        rows = [r[s] for s in sorted(r)]
        params = sorted({x["params"] for x in rows})
        lines.append(
            f"| {b} | {', '.join(f'{p:,}' for p in params)} | {len(rows)} "
            f"| {ci_text(*t_interval([x['loss'] for x in rows]))} "
            f"| {np.mean([x['bpb'] for x in rows]):.4f} "
            f"| {np.median([x['tps'] for x in rows]):,.0f} "
            f"| {max(x['peak'] for x in rows) / 1e6:.1f} |")
    lines += ["", "Paired by seed (same data order), 95% t interval of the difference in final "
              "val loss:", "", "| difference | seeds | mean [95% t CI] | verdict |",
              "|---|---|---|---|"]
    for b in BLOCKS:
        if b == BASE:
            continue
        common = sorted(set(runs[b]) & set(runs[BASE]))
        if not common:
            lines.append(f"| {b} - {BASE} | 0 | - | - |")
            continue
        d = [runs[b][s]["loss"] - runs[BASE][s]["loss"] for s in common]
        mean, low, high = t_interval(d)
        if low is None:
            verdict = "n/a (1 seed)"
        elif high < 0:
            verdict = f"{b} lower"
        elif low > 0:
            verdict = f"{b} higher"
        else:
            verdict = "not resolved (CI contains 0)"
        lines.append(f"| {b} - {BASE} | {len(common)} | {ci_text(mean, low, high)} | {verdict} |")
    lines += ["", "Per seed (final val loss / tokens/s):", "",
              "| block | " + " | ".join(f"seed {s}" for s in sorted(
                  {s for b in runs.values() for s in b})) + " |"]
    all_seeds = sorted({s for b in runs.values() for s in b})
    lines.append("|---|" + "---|" * len(all_seeds))
    for b in BLOCKS:
        cells = [f"{runs[b][s]['loss']:.4f} / {runs[b][s]['tps']:,.0f}" if s in runs[b] else "-"
                 for s in all_seeds]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    tmp = out / "REPORT.md.tmp"
    tmp.write_text(text)
    tmp.replace(out / "REPORT.md")
    print(text, end="")


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    out = Path(sys.argv[1])
    if not out.is_dir():
        sys.exit(f"compare_blocks: error: {out} is not a directory")
    report(out)


if __name__ == "__main__":
    main()
