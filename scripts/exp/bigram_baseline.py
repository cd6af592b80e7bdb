#!/usr/bin/python3
"""Count n-gram baselines of a prepared data directory: the val-split loss (nats per token) of a
unigram and of a bigram model counted on the train split, the floor any trained model should beat.

The bigram is smoothed towards the unigram (a Dirichlet prior of weight ALPHA: p(b | a) =
(c(a, b) + ALPHA * p(b)) / (c(a) + ALPHA)), the unigram add-one smoothed. ALPHA is chosen on a
dev split held out of train (its last 10%) from a grid of powers of ~3, then the counts are
redone on the whole train split: val is never used to choose it. Reads meta.json (token_width) and the token shards train.bin / val.bin (format 2: a 32-byte
header — magic "LLMTOKS1", version, width, token count, checksum block size, header CRC — then
little-endian token ids, then the checksum table, see data/shard.h).

Usage: scripts/exp/bigram_baseline.py DATA_DIR [--alpha 1.0] [--json]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np


def load(data: Path, split: str, width: int) -> np.ndarray:
    raw = (data / f"{split}.bin").read_bytes()
    if raw[:8] != b"LLMTOKS1":
        sys.exit(f"bigram_baseline: error: {data / split}.bin is not a ledgerlm token shard")
    version = int.from_bytes(raw[8:12], "little")
    if version != 2:
        sys.exit(f"bigram_baseline: error: {data / split}.bin is format {version} (expected 2; "
                 "re-run ledgerlm prepare)")
    count = int.from_bytes(raw[16:24], "little")
    dtype = {2: np.uint16, 4: np.uint32}[width]
    return np.frombuffer(raw[32:], dtype=dtype, count=count).astype(np.int64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--alpha", type=float, default=0.0, help="fixed prior weight (0: choose on dev)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    meta = json.loads((args.data / "meta.json").read_text())
    V, width = int(meta["vocab_size"]), int(meta["token_width"])
    train, val = load(args.data, "train", width), load(args.data, "val", width)
    def fit(tokens):
        uni = np.bincount(tokens, minlength=V).astype(np.float64) + 1.0
        pairs = np.bincount(tokens[:-1] * V + tokens[1:], minlength=V * V).reshape(V, V)
        return uni / uni.sum(), pairs, pairs.sum(axis=1)

    def bigram_loss(model, tokens, alpha):
        p_uni, pairs, ctx = model
        a, b = tokens[:-1], tokens[1:]
        return float(-np.log((pairs[a, b] + alpha * p_uni[b]) / (ctx[a] + alpha)).mean())

    alpha = args.alpha
    if alpha <= 0:
        cut = train.size * 9 // 10
        held = fit(train[:cut])
        grid = [0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000]
        alpha = min(grid, key=lambda g: bigram_loss(held, train[cut:], g))
    model = fit(train)
    unigram = float(-np.log(model[0][val]).mean())
    bigram = bigram_loss(model, val, alpha)
    args.alpha = alpha
    out = {"data": str(args.data), "val_tokens": int(val.size), "unigram": unigram,
           "bigram": bigram, "alpha": args.alpha}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.data}: val {val.size} tokens | unigram {unigram:.4f} nats | "
              f"bigram (alpha {args.alpha:g}) {bigram:.4f} nats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
