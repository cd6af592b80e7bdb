#!/usr/bin/python3
"""tests/tools/include_rules.py on small trees built here: the check fails on a room cycle even
when every include is allowed, fails on rules that would allow one, and passes a layered tree;
and ledgerlm's own tree has no room cycle. Run by ctest (IncludeRulesCheck); well under 1 s.

The cycle trees: room a/x.h includes b/y.h and b/z.h includes a/w.h (no module includes itself
back, so only the rooms make a cycle), with rules letting a and b include each other.
"""
import contextlib
import io
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_rules  # noqa: E402


def write(root, path, includes):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write("".join(f'#include "{i}"\n' for i in includes))


def check(root, rules):
    """include_rules --check on the tree at root under rules: (exit code, what it printed)."""
    saved = (include_rules.ROOT, include_rules.SOURCE_ROOTS, include_rules.RULES)
    include_rules.ROOT, include_rules.SOURCE_ROOTS, include_rules.RULES = root, ["src"], rules
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = include_rules.main(["--check"])
    finally:
        include_rules.ROOT, include_rules.SOURCE_ROOTS, include_rules.RULES = saved
    return code, out.getvalue()


def expect(cond, what, text):
    if not cond:
        print(f"FAILED: {what}\n{text}")
        sys.exit(1)
    print(f"ok: {what}")


with tempfile.TemporaryDirectory() as root:
    write(root, "src/a/x.h", ["src/b/y.h"])
    write(root, "src/a/w.h", [])
    write(root, "src/b/y.h", [])
    write(root, "src/b/z.h", ["src/a/w.h"])
    mutual = {"src/a": ["src/a", "src/b"], "src/b": ["src/a", "src/b"]}
    code, text = check(root, mutual)
    expect(code == 1 and "room cycle: src/a <-> src/b" in text,
           "a room cycle with every include allowed fails the check", text)

with tempfile.TemporaryDirectory() as root:
    write(root, "src/a/x.h", ["src/b/y.h"])
    write(root, "src/b/y.h", [])
    code, text = check(root, {"src/a": ["src/a", "src/b"], "src/b": ["src/a", "src/b"]})
    expect(code == 1 and "rules allow a cycle: src/a <-> src/b" in text,
           "rules letting two rooms include each other fail the check", text)
    code, text = check(root, {"src/a": ["src/a", "src/b"], "src/b": ["src/b"]})
    expect(code == 0 and "room cycles: 0" in text, "a layered tree passes", text)

out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = include_rules.main(["--check"])
expect(code == 0 and "room cycles: 0;" in out.getvalue(),
       "ledgerlm's rooms have no cycle and break no rule", out.getvalue())
