"""Report of scripts/exp/exp_zero.sh: per-rank memory by component (measured by the tracking
allocator next to the planner's prediction, and each rank's RSS), tokens/s, step time and the
communication share of the step for every run, the PyTorch DDP peer, and the ratio of
2 ranks x 1 thread to 1 rank x 2 threads per ZeRO stage. Writes REPORT.md and zero.png.

usage: zero_report.py --manifest FILE --runs DIR --out DIR --command TEXT
"""

import argparse
import datetime
import json
import os
import platform
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COMPONENTS = ["params", "grads", "master", "optim.m", "optim.v", "activations", "workspace",
              "comm", "data"]


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def ledgerlm_run(run_dir):
    recs = [r for r in records(run_dir) if "loss" in r]
    timed = recs[2:] if len(recs) > 3 else recs
    last = [r for r in recs if "mem" in r][-1]
    mem = last["mem"]
    out = {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
        "tokens_per_s_min": min(r["tokens_per_s"] for r in timed),
        "tokens_per_s_max": max(r["tokens_per_s"] for r in timed),
        "step_ms": statistics.median(r["step_ms"] for r in timed),
        "comm_ms": statistics.median(r["comm_ms"] for r in timed),
        "measured": {c: mem[c]["peak"] for c in COMPONENTS if c in mem},
        "predicted": {c: mem[c]["predicted"] for c in COMPONENTS if c in mem},
        "total_measured": mem["total"]["peak"],
        "total_predicted": mem["total"]["predicted"],
        "ranks": last.get("mem_ranks", []),
    }
    if not out["ranks"]:
        proc = mem.get("process", {})
        out["ranks"] = [{"rank": 0, "rss_hwm": proc.get("hwm", 0), "rss_anon": -1}]
    return out


def mb(x):
    return f"{x / 1e6:.1f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", required=True)
    p.add_argument("--runs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--command", required=True)
    a = p.parse_args()
    rows = []
    for line in open(a.manifest):
        name, world, threads, stage, kind = line.rstrip("\n").split("\t")
        row = {"name": name, "world": int(world), "threads": int(threads), "stage": stage,
               "kind": kind}
        if kind == "ledgerlm":
            row.update(ledgerlm_run(os.path.join(a.runs, name)))
        else:
            row.update(json.load(open(os.path.join(a.runs, name + ".json"))))
        rows.append(row)

    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    md = ["# ZeRO stages on the small shape: memory per rank and speed", "",
          f"Command: `{a.command}`. Generated {datetime.date.today()} by scripts/exp/zero_report.py "
          "from the runs' metrics.jsonl (not edited by hand).",
          f"Machine: {cpu}, {os.cpu_count()} cores, {platform.system()}.",
          "Shape: configs/bench_small.toml (L6 H6 C384, T256) on the KJV corpus (vocab 4096), "
          "AdamW, fp32, global batch 8 sequences = world x micro-batch.", "",
          "## Memory per rank (rank 0: tracking allocator, measured peak / planner prediction, MB)",
          "", "| run | world | ZeRO | " + " | ".join(COMPONENTS) + " | total | RssAnon per rank |",
          "|---|---|---|" + "---|" * len(COMPONENTS) + "---|---|"]
    for r in rows:
        if r["kind"] != "ledgerlm":
            continue
        cells = []
        for c in COMPONENTS:
            m, pr = r["measured"].get(c), r["predicted"].get(c)
            cells.append("-" if m is None else f"{mb(m)} / {mb(pr)}")
        rss = ", ".join(mb(x["rss_anon"]) for x in r["ranks"] if x.get("rss_anon", -1) >= 0)
        md.append(f"| {r['name']} | {r['world']} | {r['stage']} | " + " | ".join(cells) +
                  f" | {mb(r['total_measured'])} / {mb(r['total_predicted'])} | {rss or '-'} |")
    md += ["", "## Speed (tokens/s of the global batch: median (min-max) over the timed steps)", "",
           "| run | world x threads | ZeRO | tokens/s | step ms | comm ms | comm share | peak RSS per rank MB |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "ledgerlm":
            share = f"{100 * r['comm_ms'] / r['step_ms']:.1f}%"
            rss = ", ".join(mb(x["rss_hwm"]) for x in r["ranks"])
            comm = f"{r['comm_ms']:.1f}"
        else:
            share, comm = "-", "-"
            rss = ", ".join(mb(x) for x in r["peak_rss_bytes"])
        md.append(f"| {r['name']} | {r['world']} x {r['threads']} | {r['stage']} | "
                  f"{r['tokens_per_s']:.0f} ({r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f})"
                  f" | {r['step_ms']:.0f} | {comm} | {share} | {rss} |")
    base = next((r for r in rows if r["name"] == "w1_t2"), None)
    md += ["", "## Ratios", ""]
    if base:
        for r in rows:
            if r["kind"] == "ledgerlm" and r["world"] == 2:
                goal = 0.75 if r["stage"] == "3" else 0.90
                ratio = r["tokens_per_s"] / base["tokens_per_s"]
                md.append(f"- ratio 2 ranks x 1 thread / 1 rank x 2 threads, ZeRO {r['stage']}: "
                          f"{ratio:.2f} (goal >= {goal:.2f}: {'met' if ratio >= goal else 'NOT met'})")
        for r in rows:
            if r["kind"] == "torch":
                same = next((x for x in rows if x["kind"] == "ledgerlm" and x["world"] == r["world"]
                             and x["stage"] == "0"), None)
                if same:
                    md.append(f"- ratio ledgerlm ZeRO 0 / PyTorch DDP at {r['world']} ranks: "
                              f"{same['tokens_per_s'] / r['tokens_per_s']:.2f}")
    md += ["", "![per-rank memory and speed](zero.png)", ""]
    open(os.path.join(a.out, "REPORT.md"), "w").write("\n".join(md))
    print("\n".join(md))

    runs = [r for r in rows if r["kind"] == "ledgerlm"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5))
    bottom = [0.0] * len(runs)
    for c in COMPONENTS:
        vals = [r["measured"].get(c, 0) / 1e6 for r in runs]
        ax1.bar([r["name"] for r in runs], vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax1.scatter([r["name"] for r in runs], [r["total_predicted"] / 1e6 for r in runs],
                color="black", marker="_", s=400, label="predicted total", zorder=3)
    ax1.set_ylabel("MB per rank (rank 0)")
    ax1.set_title("memory per rank by component")
    ax1.legend(fontsize=7)
    ax1.tick_params(axis="x", rotation=45)
    names = [r["name"] for r in rows]
    ax2.bar(names, [r["tokens_per_s"] for r in rows],
            color=["tab:blue" if r["kind"] == "ledgerlm" else "tab:orange" for r in rows])
    ax2.set_ylabel("tokens/s (global batch)")
    ax2.set_title("speed (orange: PyTorch DDP, gloo)")
    ax2.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "zero.png"), dpi=110)


if __name__ == "__main__":
    main()
