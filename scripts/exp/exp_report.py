#!/usr/bin/python3
"""Writes the REPORT.md and PNGs of an experiment (scripts/exp/exp_global_batch.sh,
scripts/exp/exp_optimizers.sh) from its manifest.tsv, params.tsv and the runs' summary.json and
metrics.jsonl. Called by the scripts; regenerated, never edited by hand.

    exp_report.py global_batch|optimizers --out DIR --size SIZE --command TEXT --seconds S \
        --load "START END" --threads N
    exp_report.py tokens-per-s RUN_DIR   (a calibration run's tokens/s after its first steps)

Table conventions (tests/tools/check_exp_report.py recomputes every such cell from the runs):
a `runs` column lists the run directories a row summarises; `final val loss` is their mean,
`seed spread` the max - min of their final val losses, `tokens/s` the mean of their mean tokens/s,
`train s` the mean training time; `steps` and `tokens` are equal across them.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import plot  # noqa: E402  (scripts/plot.py: the figures)


# ---- reading an experiment ----

def read_tsv(path):
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [dict(zip(rows[0], r)) for r in rows[1:]]


class Experiment:
    def __init__(self, out):
        self.out = out
        self.manifest = read_tsv(os.path.join(out, "manifest.tsv"))
        self.params = {r["key"]: r["value"] for r in read_tsv(os.path.join(out, "params.tsv"))}
        self.runs = {}
        for row in self.manifest:
            run_dir = os.path.join(out, "runs", row["name"])
            summary = None  # a diverged run (EXP_MAY_DIVERGE) stopped without one
            if row["status"] == "ok":
                with open(os.path.join(run_dir, "summary.json")) as f:
                    summary = json.load(f)
            self.runs[row["name"]] = dict(row, dir=run_dir, summary=summary,
                                          records=plot.read_records(run_dir))

    def part(self, part):
        return [r for r in self.manifest if r["part"] == part]

    def names(self, part, label):
        return [r["name"] for r in self.part(part) if r["label"] == label]

    def labels(self, part):
        seen = []
        for r in self.part(part):
            if r["label"] not in seen:
                seen.append(r["label"])
        return seen


def val(exp, name):
    return exp.runs[name]["summary"]["final_val_loss"]


def mean(xs):
    return sum(xs) / len(xs)


def spread(exp, names):
    vs = [val(exp, n) for n in names]
    return max(vs) - min(vs)


def losses(exp, name):
    return {r["step"]: r["loss"] for r in exp.runs[name]["records"] if "loss" in r}


def max_loss_diff(exp, names):
    """Largest difference between the runs' train losses at any step they share."""
    curves = [losses(exp, n) for n in names]
    steps = set(curves[0]).intersection(*curves[1:])
    return max(max(c[s] for c in curves) - min(c[s] for c in curves) for s in steps)


def fmt_runs(names):
    return ", ".join(names)


def mb(x):
    return f"{x / 1e6:.2f}"


def mean_peak_mb(exp, names, tag):
    """Mean over the runs of a ledger component's peak bytes (summary.json's `mem`), in MB."""
    return mb(mean([exp.runs[n]["summary"]["mem"][tag]["peak"] for n in names]))


def summary_cells(exp, names):
    """The cells of the conventional columns for a group of runs ("diverged" if one did)."""
    s = [exp.runs[n]["summary"] for n in names]
    if any(x is None for x in s):
        return {k: "diverged" for k in ("steps", "tokens", "final val loss", "seed spread",
                                        "tokens/s", "train s")}
    return {"steps": f"{s[0]['steps']}", "tokens": f"{s[0]['tokens']}",
            "final val loss": f"{mean([x['final_val_loss'] for x in s]):.4f}",
            "seed spread": f"{spread(exp, names):.4f}",
            "tokens/s": f"{mean([x['mean_tokens_per_s'] for x in s]):.0f}",
            "train s": f"{mean([x['train_s'] for x in s]):.1f}"}


def table(header, rows):
    right = ["---:" if h not in ("runs", "configuration", "split", "optimizer", "rank", "chosen",
                                 "rule", "beyond seed spread")
             else "---" for h in header]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(right) + "|"]
    out += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows]
    return out + [""]


# ---- the parts every report has ----

def machine():
    cpu, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and cpu == "unknown CPU":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    # The flags that choose ledgerlm's CPU kernel path (a model name alone, e.g. "AMD EPYC",
    # does not tell an AVX2-only CPU from an AVX-512 one).
    isa = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16") if f in flags) or "no avx2"
    return f"{cpu} ({isa}), {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def version():
    """The commit the runs were made with, "-dirty" when the tree had changes; None outside git."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def header(exp, a, title, what):
    load_start, load_end = a.load.split()
    return [f"# {title}", "",
            f"{what}", "",
            f"- Size: **{a.size}** (`--size {a.size}`; model `{exp.params['model']}`, "
            f"T = {exp.params['seq']}).",
            f"- Command: `{a.command}` — this file and its figures are written by it "
            "(scripts/exp/exp_report.py from the runs' summary.json and metrics.jsonl), never by hand.",
            f"- Machine: {machine()}; single-process runs on {a.threads} threads, ranks under "
            "mpirun on 1 thread each.",
            f"- Version: ledgerlm commit {version() or '(not a git checkout)'}.",
            f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
            f"{len(exp.runs)} runs in {a.seconds / 60:.1f} min; 1-minute load average "
            f"{load_start} at the start, {load_end} at the end.", ""]


def config_block(exp, name):
    with open(os.path.join(exp.runs[name]["dir"], "config.toml")) as f:
        text = f.read().replace(os.getcwd() + "/", "")
    return ["<details><summary>Resolved config of " + name + " (config.toml; other runs differ "
            "in the keys the tables name)</summary>", "", "```toml", text.rstrip(), "```", "",
            "</details>", ""]


def figure(exp, out_name, panels, title, ncols=None):
    """panels: [(runs [(label, name)], metric, x, band, logy, panel title)], ncols to a row."""
    plt = plot.pyplot()
    ncols = ncols or len(panels)
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 4.6 * nrows), dpi=100,
                             squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (runs, metric, x, band, logy, sub) in zip(axes.flat, panels):
        plot.draw(ax, [(label, exp.runs[n]["records"]) for label, n in runs], metric, x, band)
        if logy:
            ax.set_yscale("log")
        ax.set_title(sub, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plot.save(fig, os.path.join(exp.out, out_name))
    plt.close(fig)
    return [f"![{title}]({out_name})", ""]


def verdict(best_label, best, other_label, other, spread_best, spread_other):
    """Names a winner only where the gap exceeds both seed spreads."""
    gap = other - best
    yard = max(spread_best, spread_other)
    if gap > yard:
        return (f"**{best_label}** is ahead of {other_label} by {gap:.4f} nats, more than the seed "
                f"spread ({yard:.4f}).")
    return (f"{best_label} and {other_label} are {gap:.4f} nats apart, within the seed spread "
            f"({yard:.4f}): no winner between them at this size.")


# ---- exp_optimizers.sh ----

STATE_TAGS = ("optim.m", "optim.v", "optim.momentum", "optim.codes", "optim.absmax",
              "optim.factored")


CALIB_SKIP = 5  # first steps of a calibration run left out: allocation and page faults


def calibrated_tokens_per_s(records):
    """Tokens per step over the lower quartile of the step times after the first CALIB_SKIP
    (sorted, element floor((n - 1) / 4)): the machine's pace for this optimizer, robust to a
    passing slow stretch of the machine (up to three quarters of the steps), which a mean over
    a run of a second or two is not."""
    steps = [r for r in records if "loss" in r][CALIB_SKIP:]
    if not steps:
        sys.exit(f"exp_report: a calibration run needs more than {CALIB_SKIP} steps")
    tokens_per_step = steps[0]["tokens"] / steps[0]["step"]
    ms = sorted(r["step_ms"] for r in steps)
    return tokens_per_step / (ms[(len(ms) - 1) // 4] / 1e3)


def state_bytes_per_param(summary):
    mem = summary["mem"]
    return sum(mem[t]["peak"] for t in STATE_TAGS if t in mem) / summary["params"]


def optimizers_calibration(exp):
    p = exp.params
    md = ["## 1. Calibration: the wall-clock budget as tokens", "",
          f"Asked: **{float(p['seconds']):g} s** of training per run of the wall-clock ranking "
          f"(3b). Each optimizer ran {p['calib_steps']} steps at its middle LR, just before its runs "
          f"of 3b; its tokens/s over "
          f"the steps after the first {CALIB_SKIP} (`calibrated tokens/s`: tokens per step over "
          "the lower quartile of their step times, so that a passing slow stretch of the "
          "machine does not set the budget) turns the seconds into a token budget of whole steps of "
          f"{int(p['micro']) * int(p['seq'])} tokens (`tokens it became`: what the runs of 3b "
          "trained on). The `train s` of the "
          "runs in 3b shows how close the conversion came on the day.", ""]
    rows = []
    for r in exp.part("calibration"):
        opt, tps = r["label"], calibrated_tokens_per_s(exp.runs[r["name"]]["records"])
        rows.append(dict(summary_cells(exp, [r["name"]]), optimizer=opt, runs=r["name"],
                         **{"calibrated tokens/s": f"{tps:.0f}",
                            "budget asked s": f"{float(p['seconds']):g}",
                            "tokens it became": str(exp.runs[exp.names("final_wall", opt)[0]]
                                                    ["summary"]["tokens"]),
                            "vs fastest": ""}))
        rows[-1]["_tps"] = tps
    fastest = max(r["_tps"] for r in rows)
    for r in rows:
        r["vs fastest"] = f"{r['_tps'] / fastest:.2f}"
    return md + table(["optimizer", "runs", "steps", "calibrated tokens/s", "vs fastest",
                       "budget asked s", "tokens it became"], rows)


def optimizers_sweep(exp):
    md = [f"## 2. LR sweep (first seed, {exp.params['budget']} tokens each)", "",
          "Three LRs per optimizer under one token budget, the same for every optimizer; the "
          "lowest final val loss picks the LR of both final rankings. An LR at the edge of its "
          "grid means the best may lie beyond it.", ""]
    finals = {opt: exp.params[f"best_{opt}"] for opt in exp.labels("sweep")}
    rows = []
    for r in exp.part("sweep"):
        s = exp.runs[r["name"]]["summary"]
        row = dict(optimizer=r["label"], lr=r["lr"], runs=r["name"],
                   chosen="yes" if finals.get(r["label"]) == r["lr"] else "")
        if s is None:
            row.update({"tokens": "diverged", "final val loss": "diverged"})
        else:
            row.update({k: v for k, v in summary_cells(exp, [r["name"]]).items()
                        if k in ("tokens", "final val loss")})
        rows.append(row)
    edge = []
    for opt in exp.labels("sweep"):
        lrs = [r["lr"] for r in exp.part("sweep") if r["label"] == opt]
        if finals.get(opt) in (lrs[0], lrs[-1]):
            edge.append(f"{opt} ({finals[opt]})")
    md += table(["optimizer", "lr", "runs", "tokens", "final val loss", "chosen"], rows)
    return md + [("Chosen at the edge of the grid: " + ", ".join(edge) + ".") if edge
                 else "Every chosen LR lies inside its grid.", ""]


def final_names(exp, part, opt):
    """The runs of a final ranking's row; the same-token ranking's first seed is the sweep's run
    at the chosen LR (the same configuration)."""
    names = exp.names(part, opt)
    if part == "final_tokens":
        names = [f"sweep_{opt}_lr{exp.params[f'best_{opt}']}"] + names
    return names


def optimizers_final(exp, part, title, budget_text, png):
    md = [title, "", budget_text, ""]
    rows = []
    for opt in exp.labels("sweep"):
        names = final_names(exp, part, opt)
        cells = summary_cells(exp, names)
        sums = [exp.runs[n]["summary"] for n in names]
        state = mean([state_bytes_per_param(x) for x in sums])
        rows.append(dict(cells, optimizer=opt, runs=fmt_runs(names), lr=exp.runs[names[0]]["lr"],
                         **{"state bytes/param": f"{state:.2f}",
                            "optim ms": f"{mean([x['mean_optim_ms'] for x in sums]):.2f}",
                            "peak MB": mean_peak_mb(exp, names, "total"),
                            "ckpt MB": mb(mean([x["ckpt_bytes"] for x in sums]))}))
    rows.sort(key=lambda r: float(r["final val loss"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = str(i)
    md += table(["rank", "optimizer", "lr", "runs", "tokens", "steps", "final val loss",
                 "seed spread", "train s", "tokens/s", "optim ms", "state bytes/param",
                 "peak MB", "ckpt MB"], rows)
    b, o = rows[0], rows[1]
    md += ["Ranking by the mean final val loss. " +
           verdict(b["optimizer"], float(b["final val loss"]), o["optimizer"],
                   float(o["final val loss"]), float(b["seed spread"]), float(o["seed spread"])),
           ""]
    apart = [f"{r['optimizer']} (rank {r['rank']})" for r in rows[1:]
             if float(r["final val loss"]) - float(b["final val loss"])
             <= max(float(b["seed spread"]), float(r["seed spread"]))]
    md += ["Within the seed spread of the first: " + (", ".join(apart) or "none") + ".", ""]
    if part == "final_wall":
        asked = float(exp.params["seconds"])
        took = [float(r["train s"]) for r in rows]
        if min(took) < 0.75 * asked or max(took) > 1.25 * asked:
            md += [f"**The conversion missed on this run:** the runs trained {min(took):.1f} to "
                   f"{max(took):.1f} s against {asked:g} s asked (more than 25% off), so the "
                   "machine's pace changed between the calibration and these runs (see the load "
                   "average above, and compare the calibrated tokens/s of section 1 with the "
                   "tokens/s here); this ranking measures the calibration's tokens, not an "
                   "equal wall-clock budget. Rerun on a quiet machine.", ""]
        else:
            md += [f"The runs trained {min(took):.1f} to {max(took):.1f} s against {asked:g} s "
                   "asked: the conversion held.", ""]
    runs = [(opt, n) for opt in exp.labels("sweep") for n in final_names(exp, part, opt)]
    firsts = [(opt, final_names(exp, part, opt)[0]) for opt in exp.labels("sweep")]
    md += figure(exp, png,
                 [(runs, "val_loss", "tokens", True, False, "val loss vs tokens (mean, band: seeds)"),
                  (firsts, "val_loss", "wall_s", False, False,
                   "val loss vs wall-clock seconds (first seed)")],
                 title.lstrip("# "))
    return md


def report_optimizers(exp, a):
    p = exp.params
    md = header(exp, a, "Optimizers under a fixed budget: the same tokens, the same seconds",
                "SGD (momentum 0.9), AdamW, LAMB, LARS, Adafactor, 8-bit AdamW and AdamW with "
                "bf16 state (adamw_bf16) on a small GPT (scripts/exp/exp_optimizers.sh), each at its "
                f"best LR of a short sweep under one token budget ({p['budget']} tokens), then "
                "ranked under (a) that same token budget and (b) the same wall-clock budget "
                f"({float(p['seconds']):g} s of training, converted into a token budget per "
                "optimizer by calibration). Seeds: " +
                ", ".join(sorted({r["seed"] for r in exp.part("final_wall")})) + ".")
    md += optimizers_calibration(exp) + optimizers_sweep(exp)
    md += ["`optim ms`: the optimizer step's mean time per step; `state bytes/param`: the "
           "optimizer state's peak bytes over the parameter count; `peak MB`: the tracked peak "
           "of all components; `ckpt MB`: the last checkpoint's files.", ""]
    md += optimizers_final(
        exp, "final_tokens", f"## 3a. Final: the same token budget ({p['budget']} tokens), "
        "every seed",
        f"Every optimizer at its swept LR on the sweep's {p['budget']} tokens. The first seed's "
        "run is the sweep's run at that LR (the same configuration; the LR was picked on it, "
        "which flatters that seed a little).", "optimizers_tokens.png")
    md += optimizers_final(
        exp, "final_wall", f"## 3b. Final: the same wall-clock budget ({float(p['seconds']):g} s), "
        "every seed",
        f"Every optimizer at its swept LR on the tokens its calibration made of "
        f"{float(p['seconds']):g} s (section 1): a faster optimizer gets more tokens.",
        "optimizers_wall.png")
    md += ["## Common settings", "", f"`{exp.params['common']}`", "",
           "Adafactor: `--optim.weight_decay 0 --optim.adafactor_relative_step false`; "
           "adamw_bf16: `--optim.name adamw --optim.weight_decay 0.1 --precision.state bf16`; the "
           "others `--optim.weight_decay 0.1`.", ""]
    return md + config_block(exp, exp.part("final_wall")[0]["name"])


# ---- exp_global_batch.sh ----

def global_batch_equivalence(exp):
    rows, names = [], exp.part("equivalence")
    ref = names[0]["name"]  # 1x8x1 at the first seed
    refs = exp.names("equivalence", "1x8x1")
    md = ["## A. One global batch, six splits", "",
          f"A global batch of 8 sequences x {exp.params['seq']} tokens for "
          f"{exp.params['eq_steps']} steps (AdamW, lr {exp.params['eq_lr']}, dropout "
          f"{exp.params['eq_dropout']}), split as world x "
          "micro-batch x accumulation; the 2- and 4-rank splits run under mpirun (4 ranks on 2 "
          "cores: oversubscribed, so their tokens/s say nothing about speed). Each split's "
          f"deviation from the reference {ref} is set against the spread between seeds of the "
          f"reference split ({len(refs)} seeds), the size of a difference that matters. "
          "`peak act MB`: the activations' peak in rank 0's ledger (a smaller micro-batch holds "
          "fewer activations).", ""]
    worst = (0.0, ref)
    for r in names:
        if r["name"] in refs and r["name"] != ref:
            continue
        n = r["name"]
        d = max_loss_diff(exp, [n, ref])
        if n != ref:
            worst = max(worst, (d, n))
        rows.append(dict(summary_cells(exp, [n]), **{
            "split": f"{r['world']}x{r['micro']}x{r['accum']}", "runs": n,
            f"max abs loss diff vs {ref}": f"{d:.2e}",
            f"abs final val diff vs {ref}": f"{abs(val(exp, n) - val(exp, ref)):.2e}",
            "peak act MB": mean_peak_mb(exp, [n], "activations")}))
    cols = ["split", "runs", "final val loss", f"max abs loss diff vs {ref}",
            f"abs final val diff vs {ref}", "peak act MB", "tokens/s"]
    md += table(cols, rows)
    seed_d = max_loss_diff(exp, refs)
    md += table(["configuration", "runs", "final val loss", "seed spread",
                 "max abs loss diff between the runs"],
                [dict(summary_cells(exp, refs), configuration="1x8x1, seeds " +
                      ", ".join(exp.runs[n]["seed"] for n in refs), runs=fmt_runs(refs),
                      **{"max abs loss diff between the runs": f"{seed_d:.2e}"})])
    tol = seed_d / 10
    outside = [r["runs"] for r in rows
               if float(r[f"max abs loss diff vs {ref}"]) > tol]
    md += [f"Tolerance: a tenth of the seed spread of the train loss, {tol:.2e} nats at every "
           f"step. Largest deviation of a split from the reference: {worst[0]:.2e} nats "
           f"({worst[1]}), {worst[0] / seed_d:.1e} of the seed spread ({seed_d:.2e}): "
           + ("**every split is within the tolerance**: the splits train the same model up to "
              "summation order." if not outside else
              "**outside the tolerance: " + ", ".join(outside) + "**."), ""]
    curves = [(f"{r['world']}x{r['micro']}x{r['accum']} s{r['seed']}", r["name"]) for r in names]
    md += figure(exp, "equivalence.png",
                 [(curves, "loss", "step", False, False, "train loss per step, every split"),
                  (curves, "val_loss", "tokens", False, False, "val loss")],
                 "one global batch, six splits (the curves lie on top of each other)")
    return md


def first_seed(exp, names):
    return [n for n in names if exp.runs[n]["seed"] == exp.params["seeds"].split()[0]]


def delta_cells(exp, rows, key, ref_value):
    """Fills `Δ vs REF (same G)` and `beyond seed spread` of rows [(row, names)] grouped by G.

    Δ: the row's mean final val loss minus that of the row of the same global batch whose `key`
    cell is ref_value (unrounded means); beyond seed spread: whether |Δ| exceeds the larger seed
    spread of the two rows. n/a where either row diverged."""
    col = f"Δ vs {ref_value} (same G)"
    refs = {r["global batch"]: names for r, names in rows if r[key] == ref_value}
    for r, names in rows:
        ref = refs.get(r["global batch"])
        if ref is None or r["final val loss"] == "diverged" or any(
                exp.runs[n]["summary"] is None for n in ref):
            r[col], r["beyond seed spread"] = "n/a", "n/a"
            continue
        d = mean([val(exp, n) for n in names]) - mean([val(exp, n) for n in ref])
        r[col] = f"{d:+.4f}"
        r["beyond seed spread"] = "yes" if abs(d) > max(spread(exp, names),
                                                       spread(exp, ref)) else "no"
    return col


def final_vs_batch(exp, out_name, series_, title):
    """Final val loss (mean, min-max over seeds) against the global batch, one line per series
    [(label, [(G, names)])]."""
    plt = plot.pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.6), dpi=100)
    for i, (label, points) in enumerate(series_):
        pts = [(g, [val(exp, n) for n in names]) for g, names in points
               if all(exp.runs[n]["summary"] is not None for n in names)]
        if not pts:
            continue
        xs = [g for g, _ in pts]
        ys = [mean(v) for _, v in pts]
        lo = [mean(v) - min(v) for _, v in pts]
        hi = [max(v) - mean(v) for _, v in pts]
        ls, mk = plot.STYLES[i % len(plot.STYLES)]
        ax.errorbar(xs, ys, yerr=[lo, hi], linestyle=ls, marker=mk, capsize=3, label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted({g for _, points in series_ for g, _ in points})
    ax.set_xticks(ticks, [str(g) for g in ticks])
    ax.minorticks_off()
    ax.set_xlabel("global batch (sequences)")
    ax.set_ylabel("final val loss (mean; bars: seed min-max)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    plot.save(fig, os.path.join(exp.out, out_name))
    plt.close(fig)
    return [f"![{title}]({out_name})", ""]


def global_batch_scaling(exp):
    p = exp.params
    g0 = p["scale_g0"]
    md = ["## B. Scaling the global batch at a fixed token budget", "",
          f"Every global batch G (sequences of {p['seq']} tokens) trains on the same "
          f"{p['scale_tokens']} tokens (AdamW, micro-batches of up to 16 sequences, accumulation "
          "above), so a larger G takes fewer, larger steps. Two LR rules from one base LR "
          f"({p['scale_lr']} at G = {g0}): **linear**, the linear scaling rule with warmup (peak "
          f"LR x G/{g0}, warming up linearly over the first 10% of the steps, i.e. of the "
          "tokens), and **fixed** (the base LR at every G, no warmup). Both decay by cosine to a "
          "tenth of the peak. `Δ vs fixed (same G)`: the linear rule's mean final val loss minus "
          "that of the fixed LR at the same G; `beyond seed spread`: whether that gap exceeds the "
          "larger seed spread of the two rows.", ""]
    rows = []
    for label in exp.labels("scaling"):
        rule, g = label.split(" G=")
        names = exp.names("scaling", label)
        r0 = exp.runs[names[0]]
        with open(os.path.join(r0["dir"], "config.toml"), "rb") as f:
            warm = tomllib.load(f)["optim"]["warmup_steps"]
        rows.append((dict(summary_cells(exp, names), **{
            "global batch": g, "rule": rule, "runs": fmt_runs(names), "lr": r0["lr"],
            "warmup steps": str(warm)}), names))
    col = delta_cells(exp, rows, "rule", "fixed")
    rows.sort(key=lambda rn: (rn[0]["rule"] != "fixed", int(rn[0]["global batch"])))
    md += table(["global batch", "rule", "runs", "lr", "warmup steps", "steps", "tokens",
                 "final val loss", "seed spread", col, "beyond seed spread", "tokens/s",
                 "train s"], [r for r, _ in rows])
    for rule in ("fixed", "linear"):
        ok = [(float(r["final val loss"]), r["global batch"], float(r["seed spread"]))
              for r, _ in rows if r["rule"] == rule and r["final val loss"] != "diverged"]
        div = [r["global batch"] for r, _ in rows if r["rule"] == rule and
               r["final val loss"] == "diverged"]
        if not ok:
            md += [f"Rule {rule}: every batch diverged.", ""]
            continue
        best = min(ok)
        worse = [f for f in ok if f[0] - best[0] > max(best[2], f[2])]
        md += [f"Rule **{rule}**: lowest final val loss at G = {best[1]} ({best[0]:.4f}); worse "
               "by more than the seed spread: " +
               (", ".join(f"G = {f[1]} (+{f[0] - best[0]:.4f})" for f in worse) or "none") +
               ("; diverged: " + ", ".join(f"G = {g}" for g in div) if div else "") + ".", ""]
    better = [r["global batch"] for r, _ in rows if r["rule"] == "linear" and
              r["beyond seed spread"] == "yes" and float(r[col]) < 0]
    worse_ = [r["global batch"] for r, _ in rows if r["rule"] == "linear" and
              r["beyond seed spread"] == "yes" and float(r[col]) > 0]
    md += ["The linear rule against the fixed LR at the same G, beyond the seed spread: better at " +
           (", ".join(f"G = {g}" for g in better) or "no G") + "; worse at " +
           (", ".join(f"G = {g}" for g in worse_) or "no G") + ".", ""]
    panels = []
    for rule in ("fixed", "linear"):
        groups = [(f"G={r['global batch']}", n) for r, names in rows if r["rule"] == rule
                  and r["final val loss"] != "diverged" for n in names]
        firsts = [(f"G={r['global batch']} s{exp.runs[n]['seed']}", n) for r, names in rows
                  if r["rule"] == rule and r["final val loss"] != "diverged"
                  for n in first_seed(exp, names)]
        if groups:
            panels += [(groups, "val_loss", "tokens", True, False,
                        f"rule {rule}: val loss vs tokens (mean, band: seeds)"),
                       (firsts, "val_loss", "wall_s", False, False,
                        f"rule {rule}: val loss vs wall-clock seconds (first seed)")]
    md += figure(exp, "scaling.png", panels,
                 "global batch scaling at a fixed token budget, without and with the linear "
                 "LR rule", ncols=2)
    md += final_vs_batch(exp, "scaling_final.png",
                         [(rule, [(int(r["global batch"]), names) for r, names in rows
                                  if r["rule"] == rule]) for rule in ("fixed", "linear")],
                         "final val loss against the global batch, per LR rule")
    return md


def global_batch_large(exp):
    p = exp.params
    g0, batches = p["large_g0"], p["large_batches"].split()
    lrs = dict(zip(p["large_lrs"].split()[::2], p["large_lrs"].split()[1::2]))
    same_model = p["large_model"] == p["model"] and p["large_seq"] == p["seq"]
    md = ["## C. Large batch: AdamW, LAMB and LARS up to G = " + batches[-1], "",
          f"Global batches of {', '.join(batches)} sequences of {p['large_seq']} tokens, built "
          "by accumulation above 64 sequences per micro-batch, all on the same "
          f"{p['large_tokens']} tokens, each optimizer with the linear scaling rule + warmup "
          f"from its base LR at G = {g0} (" +
          ", ".join(f"{o} {lr}" for o, lr in lrs.items()) +
          f"; peak LR x G/{g0}, warmup over the first 10% of the steps, cosine to a tenth). " +
          ("Same model as parts A and B." if same_model else
           f"**Part C trains a smaller model than parts A and B** (`{p['large_model']}`, "
           f"T = {p['large_seq']}) so that G = {batches[-1]} fits the size's time limit."),
          "", f"**Largest global batch of this run: {batches[-1]} sequences "
          f"({int(batches[-1]) * int(p['large_seq'])} tokens per step).**", "",
          "`Δ vs adamw (same G)`: the optimizer's mean final val loss minus AdamW's at the same "
          "G; `beyond seed spread`: whether that gap exceeds the larger seed spread of the two "
          "rows. A diverged row stopped on a non-finite loss (its LR too high).", ""]
    rows = []
    for label in exp.labels("large_batch"):
        optim, g = label.split(" G=")
        names = exp.names("large_batch", label)
        cells = summary_cells(exp, names)
        rows.append((dict(cells, **{"global batch": g, "optimizer": optim,
                                    "runs": fmt_runs(names), "lr": exp.runs[names[0]]["lr"],
                                    "accum": exp.runs[names[0]]["accum"]}), names))
    col = delta_cells(exp, rows, "optimizer", "adamw")
    md += table(["global batch", "optimizer", "lr", "accum", "runs", "steps", "tokens",
                 "final val loss", "seed spread", col, "beyond seed spread", "tokens/s",
                 "train s"], [r for r, _ in rows])
    behind = []
    for g in batches:
        here = [r for r, _ in rows if r["global batch"] == g]
        ahead = [f"{r['optimizer']} ({r[col]})" for r in here
                 if r["optimizer"] != "adamw" and r["beyond seed spread"] == "yes"
                 and float(r[col]) < 0]
        adam = [r for r in here if r["optimizer"] == "adamw"][0]
        ok = [r for r in here if r["final val loss"] != "diverged"]
        best = min(ok, key=lambda r: float(r["final val loss"])) if ok else None
        if adam["final val loss"] == "diverged":
            line = f"G = {g}: AdamW diverged"
            behind.append(g)
        elif ahead:
            line = f"G = {g}: AdamW behind, beyond the seed spread: " + ", ".join(ahead)
            behind.append(g)
        else:
            line = f"G = {g}: AdamW keeps up (no optimizer ahead of it by more than the seed spread)"
        if best is not None:
            line += f"; best {best['optimizer']} ({best['final val loss']})"
        md += ["- " + line + "."]
    keeps = [g for g in batches if g not in behind]
    if not behind:
        answer = (f"Nowhere up to G = {batches[-1]} in this run: at no batch did another "
                  "optimizer beat it by more than the seed spread.")
    elif keeps and behind == batches[len(batches) - len(behind):]:
        answer = (f"From G = {behind[0]} on in this run (it diverged there, or another optimizer "
                  "beat it by more than the seed spread); it kept up at G = " +
                  ", ".join(keeps) + ".")
    elif not keeps:
        answer = ("At every batch of this run, the first included: it diverged or another "
                  "optimizer beat it by more than the seed spread at G = " + ", ".join(behind) +
                  ".")
    else:
        answer = ("Not as the batch grows, in this run: AdamW is behind (diverged, or beaten by "
                  "more than the seed spread) at G = " + ", ".join(behind) + " and keeps up at "
                  "G = " + ", ".join(keeps) + ".")
    md += ["", "**Where does AdamW stop keeping up?** " + answer, ""]
    panels = []
    for g in batches:
        groups = [(r["optimizer"], n) for r, names in rows if r["global batch"] == g
                  and r["final val loss"] != "diverged" for n in names]
        if groups:
            panels.append((groups, "val_loss", "tokens", True, False,
                           f"G = {g}: val loss vs tokens (mean, band: seeds)"))
    md += figure(exp, "large_batch.png", panels,
                 f"AdamW vs LAMB vs LARS, linear scaling + warmup, {p['large_tokens']} tokens",
                 ncols=min(3, len(panels)))
    md += final_vs_batch(exp, "large_batch_final.png",
                         [(o, [(int(r["global batch"]), names) for r, names in rows
                               if r["optimizer"] == o]) for o in lrs],
                         "final val loss against the global batch, per optimizer")
    return md


def report_global_batch(exp, a):
    md = header(exp, a, "Global batch: equivalence of splits, scaling, large batch",
                "Three questions about the global batch on a small GPT (scripts/exp/exp_global_batch.sh): "
                "does splitting one global batch across ranks and accumulation steps change "
                "training; what does a larger batch cost at a fixed token budget, with and without "
                "the linear LR scaling rule; and does AdamW keep up with LAMB and LARS as the "
                f"batch grows to {exp.params['large_batches'].split()[-1]} sequences. "
                "Seeds per configuration: " + ", ".join(exp.params["seeds"].split()) +
                " (the reference split of part A: " + ", ".join(exp.params["eq_seeds"].split()) +
                ").")
    md += global_batch_equivalence(exp) + global_batch_scaling(exp) + global_batch_large(exp)
    md += ["## Common settings", "", f"Parts A and B: `{exp.params['common']}`", "",
           f"Part C: `{exp.params['large_common']}`", "",
           f"Part A with `--model.dropout {exp.params['eq_dropout']}`, parts B and C with "
           "`--model.dropout 0`.", ""]
    return md + config_block(exp, exp.manifest[0]["name"])


def main():
    if sys.argv[1:2] == ["tokens-per-s"]:  # exp_optimizers.sh's calibration: RUN_DIR
        print(f"{calibrated_tokens_per_s(plot.read_records(sys.argv[2])):.1f}")
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=["global_batch", "optimizers"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--load", required=True)
    ap.add_argument("--threads", required=True)
    a = ap.parse_args()
    exp = Experiment(a.out)
    md = (report_global_batch if a.experiment == "global_batch" else report_optimizers)(exp, a)
    tmp = os.path.join(a.out, "REPORT.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md))
    os.replace(tmp, os.path.join(a.out, "REPORT.md"))


if __name__ == "__main__":
    main()
