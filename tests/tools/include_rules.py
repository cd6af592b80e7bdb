#!/usr/bin/env python3
"""The include graph of ledgerlm's sources, and the rooms' rules.

Every folder of the sources is a room; a file may include its own room's files and those of the
rooms its room's rule lists, nothing else. Static libraries accept references in any direction, so
the linker alone would let a lower room reach up into a higher one: this check is what keeps the
layering. It also finds include cycles between modules (a header and its source together).

  include_rules.py            print the figures: rooms, edges between them, cycles, violations
  include_rules.py --check    the same, and exit 1 on a violation, a module cycle, a room cycle
                              or rules that would allow one (a ctest test)
  include_rules.py --edges    every room-to-room edge with its count

Rules (a room may include the rooms listed, and its own; a listed room covers its sub-rooms only
where it ends in /*). Third-party and system headers (<...>) are not checked. Tests, benchmarks and
fuzz targets may include anything of the sources.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SOURCE_ROOTS = ["model", "optim", "data", "ckpt", "train"]
EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")

BASE = ["model/base"]
COMMON = BASE + ["model/backend/common"]
BACKEND = COMMON + ["model/backend", "model/backend/optim"]
# The room above every backend: it names them (the factory) and publishes the CPU backend's facts,
# so the backends' own rooms never include upwards to be created. It may wrap what it makes (the
# subnormal-counting test hook, model/backend/wrap).
BACKENDS = COMMON + ["model/backend", "model/backend/cpu", "model/backend/cuda",
                     "model/backend/guard", "model/backend/wrap", "model/backends"]
MODEL = BACKEND + ["model"]
OPTIM = MODEL + ["optim"]
DATA = BASE + ["data"]
CKPT = MODEL + ["ckpt", "data"]
CONFIG = MODEL + ["optim", "data", "train/config"]
COMM = BACKEND + ["train/comm"]
OFFLOAD = OPTIM + ["model/backend/wrap", "train/offload"]
STEP = CONFIG + ["ckpt", "train/comm", "model/backend/wrap", "train/offload", "train/step"]
LEDGER = STEP + ["model/backends", "train/ledger"]
RUN = LEDGER + ["train/run"]
CLI = RUN + ["model/backend/wrap", "train/cli"]

RULES = {
    "model/base": BASE,
    "model/backend/common": COMMON,
    "model/backend/optim": COMMON + ["model/backend", "model/backend/optim"],
    "model/backend": COMMON + ["model/backend"],
    "model/backends": BACKENDS,
    "model/backend/cpu": BACKEND + ["model/backend/cpu"],
    "model/backend/cuda": BACKEND + ["model/backend/cuda"],
    "model/backend/guard": BACKEND + ["model/backend/cpu", "model/backend/wrap"],
    "model/backend/wrap": BACKEND + ["model/backend/wrap"],
    "model": MODEL,
    "optim": OPTIM,
    "data": DATA,
    "ckpt": CKPT,
    "train/config": CONFIG,
    "train/comm": COMM,
    "train/offload": OFFLOAD,
    "train/step": STEP,
    "train/ledger": LEDGER,
    "train/run": RUN,
    "train/cli": CLI,
    "train": CLI + ["train"],  # main.cpp
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_files():
    for top in SOURCE_ROOTS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def room_of(path):
    return os.path.dirname(path)


def resolve(includer, target):
    """The repo-relative path an include names, or None for a header outside the sources."""
    for candidate in (target, os.path.join(os.path.dirname(includer), target)):
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(ROOT, candidate)) and candidate.split(os.sep)[0] in SOURCE_ROOTS:
            return candidate
    return None


def graph():
    edges = {}
    for f in source_files():
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        targets = []
        for t in INCLUDE.findall(text):
            r = resolve(f, t)
            if r is not None:
                targets.append(r)
        edges[f] = targets
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges.get(start, [])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, []))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def allowed(room, target_room):
    if target_room == room:
        return True
    rule = RULES.get(room)
    if rule is None:
        return False
    return target_room in rule


def main(argv):
    check = "--check" in argv
    edges = graph()
    rooms = sorted({room_of(f) for f in edges})
    room_edges = {}
    for f, targets in edges.items():
        for t in targets:
            a, b = room_of(f), room_of(t)
            if a != b:
                room_edges[(a, b)] = room_edges.get((a, b), 0) + 1
    violations = []
    for f, targets in sorted(edges.items()):
        for t in targets:
            if not allowed(room_of(f), room_of(t)):
                violations.append(f"{f} includes {t} (room {room_of(f)} may not include {room_of(t)})")
    unknown = [r for r in rooms if r not in RULES]
    # A header and its source are one module: foo.cpp including bar.h while bar.cpp includes foo.h
    # is a cycle between the two concepts even though no header includes itself.
    modules = {}
    for f, targets in edges.items():
        m = os.path.splitext(f)[0]
        modules.setdefault(m, set()).update(os.path.splitext(t)[0] for t in targets
                                            if os.path.splitext(t)[0] != m)
    file_cycles = cycles({m: sorted(t) for m, t in modules.items()})
    room_graph = {}
    for (a, b) in room_edges:
        room_graph.setdefault(a, []).append(b)
    room_cycles = cycles(room_graph)
    # The rules themselves must be a layering: two rooms each allowed to include the other could
    # grow a room cycle without a single violation.
    rule_cycles = cycles({room: [r for r in rule if r != room] for room, rule in RULES.items()})
    print(f"include graph: {len(edges)} files in {len(rooms)} rooms, "
          f"{sum(len(t) for t in edges.values())} includes between project files, "
          f"{len(room_edges)} room-to-room edges ({sum(room_edges.values())} includes)")
    print(f"  module include cycles: {len(file_cycles)}; room cycles: {len(room_cycles)}; "
          f"rule violations: {len(violations)}; rooms without a rule: {len(unknown)}; "
          f"cycles in the rules: {len(rule_cycles)}")
    for c in file_cycles:
        print("  cycle: " + " <-> ".join(c))
    for c in room_cycles:
        print("  room cycle: " + " <-> ".join(c))
    for c in rule_cycles:
        print("  rules allow a cycle: " + " <-> ".join(c))
    for r in unknown:
        print(f"  room without a rule: {r}")
    for v in violations:
        print("  violation: " + v)
    if "--edges" in argv:
        for (a, b), n in sorted(room_edges.items()):
            print(f"  {a} -> {b}: {n}")
    # A room cycle means two rooms are one layer in fact: either could not be built or understood
    # without the other, whatever the rules say.
    if check and (violations or file_cycles or room_cycles or rule_cycles or unknown):
        print("include_rules: FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
