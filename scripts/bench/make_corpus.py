#!/usr/bin/env python3
"""Writes a large text corpus for measuring `ledgerlm prepare`, made from a smaller text (the King
James Bible that scripts/prepare_default.sh writes) so that no download is needed.

The output is the source's lines drawn at random (seeded: the same arguments give the same bytes),
with variation so that it is not one text repeated: about one line in four has one of its words
replaced by another word of the source, one in ten has a number appended, and lines are joined
into paragraphs of 1 to 40 lines (so line lengths run from a few bytes to several KB).

  make_corpus.py SOURCE OUT SIZE_MB [--seed N] [--files K]

With --files K the output is a directory OUT of K files of about SIZE_MB / K each (a corpus of
many documents); otherwise OUT is one file. 1 MB = 10^6 bytes.
"""
import argparse
import os
import random
import sys


def paragraphs(lines, words, rng):
    """An endless stream of paragraphs (str, ending in a newline)."""
    while True:
        n = rng.randint(1, 40) if rng.random() < 0.3 else 1
        picked = rng.choices(lines, k=n)
        out = []
        for line in picked:
            if rng.random() < 0.25:
                parts = line.split(" ")
                parts[rng.randrange(len(parts))] = rng.choice(words)
                line = " ".join(parts)
            if rng.random() < 0.1:
                line += f" {rng.randrange(100000)}"
            out.append(line)
        yield " ".join(out) + "\n"


def write(path, size, stream):
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        buf_bytes = 0
        while written + buf_bytes < size:
            p = next(stream)
            buf.append(p)
            buf_bytes += len(p.encode("utf-8"))
            if buf_bytes >= 1 << 20:
                f.write("".join(buf))
                written += buf_bytes
                buf, buf_bytes = [], 0
        f.write("".join(buf))
        written += buf_bytes
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("size_mb", type=float)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", type=int, default=0)
    args = ap.parse_args()
    with open(args.source, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if not lines:
        sys.exit(f"make_corpus: error: {args.source} has no text")
    words = sorted({w for line in lines for w in line.split(" ") if w})
    rng = random.Random(args.seed)
    stream = paragraphs(lines, words, rng)
    size = int(args.size_mb * 1e6)
    if args.files <= 0:
        total = write(args.out, size, stream)
    else:
        os.makedirs(args.out)
        total = 0
        for k in range(args.files):
            total += write(os.path.join(args.out, f"doc{k:07d}.txt"), size // args.files, stream)
    print(f"make_corpus: {args.out}: {total} bytes")


if __name__ == "__main__":
    main()
