"""What the tools' own tests share: check() prints each check as `ok:` or `FAIL:` and keeps
going, so one run names every failure; finish() then ends the test, exit 1 if any failed."""
import sys

failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
