#!/usr/bin/python3
"""Prints the Markdown reference of every config key (README's "Config keys" section).

Usage: scripts/gen_config_reference.py [path/to/ledgerlm]
Defaults come from `ledgerlm config` (the binary's own resolved defaults), help texts from the key
registry in train/config/config_keys.cpp, so the table cannot drift from the code.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else str(root / "build" / "ledgerlm")
defaults, section = {}, None
for line in subprocess.run([binary, "config"], check=True, capture_output=True, text=True).stdout.splitlines():
    line = line.strip()
    if line.startswith("["):
        section = line[1:-1]
    elif "=" in line:
        key, value = line.split("=", 1)
        defaults[f"{section}.{key.strip()}"] = value.strip()

src = (root / "train" / "config" / "config_keys.cpp").read_text()
current = None
# The help text may be several adjacent string literals (clang-format wraps long entries).
for m in re.finditer(r'LLM_KEY\("(\w+)",\s*c\.[\w.]+,\s*(\w+),\s*(\w),\s*((?:"[^"]*"\s*)+)\);', src):
    sec, key, _, literals = m.groups()
    text = "".join(re.findall(r'"([^"]*)"', literals))
    if sec != current:
        print(f"\n**[{sec}]**\n\n| key | default | meaning |\n|---|---|---|")
        current = sec
    print(f"| `{key}` | `{defaults[sec + '.' + key]}` | {text.replace('|', chr(92) + '|')} |")
