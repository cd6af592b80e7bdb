#!/usr/bin/python3
"""Encodes and decodes text with a Hugging Face tokenizer directory the way transformers'
AutoTokenizer does, written from the tokenizers library's documented behaviour, not from
ledgerlm's writer (data/tokenizer_json_write.cpp), for the tests on machines without
transformers.

    tests/tools/hf_tokenizer_read.py DIR TEXTS.json

DIR holds tokenizer.json and tokenizer_config.json; TEXTS.json is a JSON list of strings or an
object whose "cases" are objects with a "text". Prints one JSON list: per text {"ids": [...],
"decoded": "..."} (decode of those ids with special tokens kept).

What it models, and refuses (exit 2, naming the key) anything else, so that it never quietly
differs from the library:
  - tokenizer_config.json: tokenizer_class PreTrainedTokenizerFast (tokenizer.json used as it
    is), clean_up_tokenization_spaces false; bos/eos/unk/pad tokens are special tokens, which
    transformers adds as added tokens, matched in the text unless split_special_tokens is true.
  - added tokens (without lstrip, rstrip, single_word): found first, leftmost-longest; special
    ones skipped when split_special_tokens is true.
  - normalizer: none. pre_tokenizer: none, or ByteLevel without the regex and without a prefix
    space (every byte of the text becomes the character GPT-2's byte-to-unicode table gives it).
  - model BPE, no dropout, prefixes, suffixes or ignore_merges: each piece starts as its
    characters; a character outside the vocabulary becomes its UTF-8 bytes' "<0xAB>" tokens
    with byte_fallback, else unk_token; then the adjacent pair with the lowest merge rank is
    merged, leftmost among equals, until no listed pair is left. Merges as [left, right] pairs or
    "left right" strings.
  - post_processor: none. decoder: ByteLevel, or a Sequence of ByteFallback (runs of "<0xAB>"
    tokens become their bytes, one U+FFFD per byte when they are not valid UTF-8) and Fuse.
"""
import json
import re
import sys


def fail(msg):
    print("hf_tokenizer_read: " + msg, file=sys.stderr)
    sys.exit(2)


def byte_level_table():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 256
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(extra)
            extra += 1
    return table


BYTE_TO_CHAR = byte_level_table()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
BYTE_TOKEN = re.compile(r"^<0x([0-9A-F]{2})>$")


def token_content(t):
    if t is None:
        return None
    return t["content"] if isinstance(t, dict) else t


class Reader:
    def __init__(self, d):
        tj = json.load(open(d + "/tokenizer.json", encoding="utf-8"))
        cfg = json.load(open(d + "/tokenizer_config.json", encoding="utf-8"))
        if cfg.get("tokenizer_class") != "PreTrainedTokenizerFast":
            fail("tokenizer_config.json: tokenizer_class is not PreTrainedTokenizerFast")
        if cfg.get("clean_up_tokenization_spaces", False):
            fail("tokenizer_config.json: clean_up_tokenization_spaces is not modelled")
        for key in ("normalizer", "post_processor", "truncation", "padding"):
            if tj.get(key) is not None:
                fail("tokenizer.json: " + key + " is not modelled")
        pre = tj.get("pre_tokenizer")
        if pre is not None and not (pre.get("type") == "ByteLevel" and not pre.get("use_regex", True)
                                    and not pre.get("add_prefix_space", True)):
            fail("tokenizer.json: pre_tokenizer is not modelled")
        self.byte_level = pre is not None
        m = tj["model"]
        if m.get("type") != "BPE":
            fail("tokenizer.json: model.type is not BPE")
        for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
            if m.get(key) is not None:
                fail("tokenizer.json: model." + key + " is not modelled")
        if m.get("ignore_merges", False) or m.get("fuse_unk", False):
            fail("tokenizer.json: model.ignore_merges / fuse_unk are not modelled")
        self.vocab = m["vocab"]
        self.byte_fallback = m.get("byte_fallback", False)
        self.unk = m.get("unk_token")
        self.ranks = {}
        for rank, merge in enumerate(m["merges"]):
            pair = tuple(merge) if isinstance(merge, list) else tuple(merge.split(" "))
            if len(pair) != 2:
                fail("tokenizer.json: merge %d is not a pair" % rank)
            self.ranks.setdefault(pair, rank)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.added = {}  # content -> (id, special)
        for a in tj.get("added_tokens", []):
            if a.get("lstrip") or a.get("rstrip") or a.get("single_word"):
                fail("tokenizer.json: added token %r: lstrip/rstrip/single_word" % a["content"])
            self.added[a["content"]] = (a["id"], a.get("special", False))
            self.id_to_token[a["id"]] = a["content"]
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            t = token_content(cfg.get(key))
            if t is not None and t not in self.added:
                if t not in self.vocab:
                    fail("tokenizer_config.json: %s %r is not in the vocabulary" % (key, t))
                self.added[t] = (self.vocab[t], True)
        self.split_special = cfg.get("split_special_tokens", False)
        dec = tj.get("decoder")
        if dec == {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}:
            self.decoder = "bytefallback"
        elif dec is not None and dec.get("type") == "ByteLevel":
            self.decoder = "bytelevel"
        else:
            fail("tokenizer.json: decoder is not modelled")

    def split_added(self, text):
        """(segment, added id or None) in order: added tokens leftmost-longest."""
        live = [t for t, (_, special) in self.added.items() if not (special and self.split_special)]
        out, start, i = [], 0, 0
        while i < len(text):
            best = max((t for t in live if text.startswith(t, i)), key=len, default=None)
            if best is None:
                i += 1
                continue
            if i > start:
                out.append((text[start:i], None))
            out.append((best, self.added[best][0]))
            i += len(best)
            start = i
        if start < len(text):
            out.append((text[start:], None))
        return out

    def bpe(self, piece):
        symbols = []
        for c in piece:
            if c in self.vocab:
                symbols.append(c)
            elif self.byte_fallback and all("<0x%02X>" % b in self.vocab for b in c.encode()):
                symbols += ["<0x%02X>" % b for b in c.encode()]
            elif self.unk is not None:
                symbols.append(self.unk)
            else:
                fail("character %r is not in the vocabulary and there is no unk_token" % c)
        while len(symbols) > 1:
            best = None
            for i in range(len(symbols) - 1):
                r = self.ranks.get((symbols[i], symbols[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        return [self.vocab[s] for s in symbols]

    def encode(self, text):
        ids = []
        for segment, added in self.split_added(text):
            if added is not None:
                ids.append(added)
            elif self.byte_level:
                ids += self.bpe("".join(BYTE_TO_CHAR[b] for b in segment.encode()))
            else:
                ids += self.bpe(segment)
        return ids

    def decode(self, ids):
        tokens = [self.id_to_token[i] for i in ids]
        if self.decoder == "bytelevel":
            data = bytearray()
            for c in "".join(tokens):
                data += bytes([CHAR_TO_BYTE[c]]) if c in CHAR_TO_BYTE else c.encode()
            return data.decode("utf-8", errors="replace")
        out, pending = [], bytearray()
        for t in tokens + [None]:
            m = BYTE_TOKEN.match(t) if t is not None else None
            if m:
                pending.append(int(m.group(1), 16))
                continue
            if pending:
                try:
                    out.append(pending.decode("utf-8"))
                except UnicodeDecodeError:
                    out.append("\ufffd" * len(pending))
                pending = bytearray()
            if t is not None:
                out.append(t)
        return "".join(out)


def main():
    if len(sys.argv) != 3:
        fail("usage: hf_tokenizer_read.py DIR TEXTS.json")
    reader = Reader(sys.argv[1])
    texts = json.load(open(sys.argv[2], encoding="utf-8"))
    if isinstance(texts, dict):
        texts = [c["text"] for c in texts["cases"]]
    result = []
    for t in texts:
        ids = reader.encode(t)
        result.append({"ids": ids, "decoded": reader.decode(ids)})
    json.dump(result, sys.stdout, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
