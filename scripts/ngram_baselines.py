#!/usr/bin/python3
"""Count n-gram baselines of a prepared data directory: the loss (nats per token) on a held-out
split (val, or test where the data has one) of a unigram and of a bigram model counted on the
train split, and ln V (a uniform guess): the floors any trained model should beat.

The bigram is smoothed towards the unigram (a Dirichlet prior of weight ALPHA: p(b | a) =
(c(a, b) + ALPHA * p(b)) / (c(a) + ALPHA)), the unigram add-one smoothed. ALPHA is chosen on a
dev split held out of train (its last 10%) from a grid of powers of ~3, then the counts are
redone on the whole train split: the evaluated split is never used to choose it. Pair counts are
kept sparse (the pairs that occur), so large vocabularies cost memory by the corpus, not V^2.
Reads meta.json (vocab_size, token_width) and the token shards SPLIT.bin (format 2: a 32-byte
header - magic "LLMTOKS1", version, width, token count, checksum block size, header CRC - then
little-endian token ids, then the checksum table, see data/shard.h). scripts/study_report.py
imports it.

Usage: scripts/ngram_baselines.py DATA_DIR [--split val|test] [--alpha A] [--json]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ALPHA_GRID = [0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000]


def load_shard(data, split, width):
    """The token ids of DATA/SPLIT.bin as int64; ValueError naming the file if it is no shard."""
    path = Path(data) / f"{split}.bin"
    raw = path.read_bytes()
    if raw[:8] != b"LLMTOKS1":
        raise ValueError(f"{path} is not a ledgerlm token shard")
    version = int.from_bytes(raw[8:12], "little")
    if version != 2:
        raise ValueError(f"{path} is format {version} (expected 2; re-run ledgerlm prepare)")
    if width not in (2, 4):
        raise ValueError(f"{path}: token width {width} (expected 2 or 4)")
    count = int.from_bytes(raw[16:24], "little")
    dtype = {2: np.uint16, 4: np.uint32}[width]
    return np.frombuffer(raw[32:], dtype=dtype, count=count).astype(np.int64)


def fit(tokens, vocab):
    """Counts of TOKENS: (add-one unigram probabilities, sorted pair codes a*V+b, their counts,
    context counts c(a))."""
    uni = np.bincount(tokens, minlength=vocab).astype(np.float64) + 1.0
    codes, counts = np.unique(tokens[:-1] * vocab + tokens[1:], return_counts=True)
    ctx = np.bincount(tokens[:-1], minlength=vocab).astype(np.float64)
    return uni / uni.sum(), codes, counts.astype(np.float64), ctx


def unigram_loss(model, tokens):
    return float(-np.log(model[0][tokens]).mean())


def bigram_loss(model, tokens, alpha, vocab):
    p_uni, codes, counts, ctx = model
    a, b = tokens[:-1], tokens[1:]
    want = a * vocab + b
    at = np.minimum(np.searchsorted(codes, want), codes.size - 1)
    pair = np.where(codes[at] == want, counts[at], 0.0)
    return float(-np.log((pair + alpha * p_uni[b]) / (ctx[a] + alpha)).mean())


def choose_alpha(train, vocab):
    """The grid's prior weight with the lowest loss on train's last 10% counted on the rest
    (1 when that tail holds no pair)."""
    cut = train.size * 9 // 10
    if train.size - cut < 2:  # no dev pair to choose on (a toy corpus): the plain prior
        return 1.0
    held = fit(train[:cut], vocab)
    return min(ALPHA_GRID, key=lambda g: bigram_loss(held, train[cut:], g, vocab))


def baselines(data, split="val", alpha=0.0):
    """{split, tokens, unigram, bigram, alpha, ln_v} of DATA on SPLIT; alpha <= 0: chosen on dev.
    OSError / KeyError / ValueError when the data cannot be read."""
    meta = json.loads((Path(data) / "meta.json").read_text())
    vocab, width = int(meta["vocab_size"]), int(meta["token_width"])
    train, held_out = load_shard(data, "train", width), load_shard(data, split, width)
    if train.size < 2 or held_out.size < 2:
        raise ValueError(f"{data}: train or {split} split has fewer than 2 tokens")
    if alpha <= 0:
        alpha = choose_alpha(train, vocab)
    model = fit(train, vocab)
    return {"data": str(data), "split": split, "tokens": int(held_out.size),
            "unigram": unigram_loss(model, held_out),
            "bigram": bigram_loss(model, held_out, alpha, vocab), "alpha": alpha,
            "ln_v": math.log(vocab)}


def main(prog="ngram_baselines"):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--split", default="val", help="the split evaluated (val or test)")
    ap.add_argument("--alpha", type=float, default=0.0, help="fixed prior weight (0: choose on dev)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        out = baselines(args.data, args.split, args.alpha)
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"{prog}: error: {e}")
    if args.json:
        print(json.dumps({("val_tokens" if k == "tokens" else k): v for k, v in out.items()}))
    else:
        print(f"{args.data}: {args.split} {out['tokens']} tokens | unigram {out['unigram']:.4f} "
              f"nats | bigram (alpha {out['alpha']:g}) {out['bigram']:.4f} nats | ln V "
              f"{out['ln_v']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
