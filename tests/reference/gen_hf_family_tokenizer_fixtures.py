#!/usr/bin/env python3
"""Makes the fixtures of the tokenizer-family tests (tests/unit/data/test_data_tokenizer_family.cpp):
small byte-level BPE tokenizers trained with the Hugging Face `tokenizers` library in the styles of
SmolLM2, Qwen2 and Llama-3 (each family's normalizer, pre-tokenizer, post-processor, model flags and
kind of added tokens, as their published tokenizer.json files have them), and the ids the library
gives for hard text. Run once by hand; the tests read the committed output and never run this.

Writes tests/reference/fixtures/hf_families/<family>/:
  tokenizer.json  the tokenizer (vocabulary ~600, pretty=False)
  expected.json   {"tokenizers_version", "family", "eot", "eot_id", "vocab_size", "cases": [{"name",
                  "text", "ids", "pieces"}]}: the
                  library's tokenizer.encode(text).ids (default settings: the post-processor's
                  BOS/EOS included, special tokens written in the text matched). The case named
                  "document" is a longer mix of every case, which the tests also `prepare` at
                  several thread counts. "pieces" (all but the document): the pre-tokenizer's
                  pieces of the normalized text, byte-level strings.

Families (what each copies from the published tokenizer.json):
  smollm2  no normalizer; pre_tokenizer Sequence[Digits(individual_digits), ByteLevel(use_regex)];
           post_processor ByteLevel; special tokens at ids 0.. (<|endoftext|> = 0, <|im_start|>,
           <|im_end|>, <repo_name>)
  qwen2    NFC normalizer; Sequence[Split(Qwen2's regex, Isolated), ByteLevel(use_regex false)];
           post_processor ByteLevel; <|endoftext|>, <|im_start|>, <|im_end|> after the vocabulary
  llama3   no normalizer; Sequence[Split(Llama-3's regex, Isolated), ByteLevel(use_regex false)];
           post_processor Sequence[ByteLevel, TemplateProcessing("<|begin_of_text|> $A")];
           model.ignore_merges true; <|begin_of_text|>, <|end_of_text|>, <|eot_id|>,
           <|reserved_special_token_0|> after the vocabulary

Training text: the first 60,000 bytes of the King James Bible (Debian package bible-kjv, references
stripped) plus the cases. Made with Python 3.11 and tokenizers 0.23.3 (recorded in expected.json):
  python3 -m venv /tmp/venv-hf && /tmp/venv-hf/bin/pip install tokenizers
  /tmp/venv-hf/bin/python tests/reference/gen_hf_family_tokenizer_fixtures.py
"""
import json
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from kjv_corpus import kjv_text

OUT = Path(__file__).resolve().parent / "fixtures" / "hf_families"

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}"
                r"\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CASES = {
    "plain": "In the beginning God created the heaven and the earth.",
    "contractions": "it's don't we're they've I'm you'll he'd IT'S DON'T We'Re 'tis",
    "digits": "1 22 333 4444 55555 3.14159 1,000,000 -7 x2 2x 0x1F 12345678901234567890",
    "digits_unicode": "\u0661\u0662\u0663 \u0968\u0969 \u2160\u2161 \u00bd \u00b2 \uff11\uff12",
    "punctuation": "Hello!!! What?! (yes) ... --- @#$%^&* \"quoted\" ~/~ a.\nb!\r\nc?\n\n",
    "spaces": "  two leading, three   inside,  trailing   ",
    "tabs": "\tone tab\t\ttwo tabs \t mixed\t",
    "newlines": "line one\nline two\r\nline three\r\n\r\n\n\nafter blank lines\n  indented\n\tx",
    "crlf_runs": "a\r\n\r\nb \r\n c\r\r\n\n d\n \n e",
    "only_space": "   ",
    "only_newlines": "\n\n\n",
    "empty": "",
    "nbsp": "a\u00a0b \u00a0c\u00a0\u00a0d\u00a0 e \u00a0",
    "unicode_spaces": "x\u2028y\u2029z \u2028 w\u0085v\u000bu\u000ct a\u2003b\u3000c\u202fd",
    "cjk": "\u5929\u5730\u7384\u9ec4\uff0c\u5b87\u5b99\u6d2a\u8352\u3002 \u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002",
    "korean_jamo": "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab \u1100\u1161 \ubb38\uc7a5",
    "emoji": "\U0001f642 \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \U0001f1fa\U0001f1f8 \u2764\ufe0f",
    "combining": "e\u0301te\u0301 cafe\u0301 n\u0303 a\u0308\u0304 \u0301alone \u212b \u2126 q\u0307\u0323",
    "accented": "na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u00df",
    "greek_cyrillic": "\u0391\u03bb\u03c6\u03b1 \u03b2\u03ae\u03c4\u03b1 \u041f\u0440\u0438\u0432\u0435\u0442",
    "control_bytes": "nul\u0000soh\u0001del\u007fesc\u001b end \u180e\u200b",
    "long_digits": "9" * 40 + " " + "1234567" * 5,
    "long_space": " " * 60 + "x" + "\n" * 30 + "y",
}

SPECIALS_TEXT = {
    "smollm2": "<|im_start|>user\nhi 42<|im_end|>\n<|endoftext|>x<|endoftext|><repo_name>a <|im_end",
    "qwen2": "<|im_start|>system\nYou are 7.<|im_end|>\n<|im_start|>user <|endoftext|>caf\u00e9<|im_end",
    "llama3": "<|begin_of_text|>hi<|eot_id|> <|end_of_text|>\n<|reserved_special_token_0|>x<|end_of",
}


def added(content, id_):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


def byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def split(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def train(family, corpus, specials_first):
    """A byte-level BPE trained on `corpus`, as a tokenizer.json dict."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, show_progress=False,
                                  special_tokens=specials_first,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return json.loads(tok.to_str())


def make(family, corpus):
    if family == "smollm2":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"]
        j = train(family, corpus, specials)
        j["added_tokens"] = [added(s, i) for i, s in enumerate(specials)]
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level(False, True, True)]}
        j["post_processor"] = byte_level(True, False, True)
        eot = "<|endoftext|>"
    else:
        j = train(family, corpus, [])
        n = len(j["model"]["vocab"])
        if family == "qwen2":
            specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
            j["normalizer"] = {"type": "NFC"}
            j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                split(QWEN2_REGEX), byte_level(False, False, False)]}
            j["post_processor"] = byte_level(False, False, False)
            eot = "<|endoftext|>"
        else:
            specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                        "<|eot_id|>"]
            j["normalizer"] = None
            j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                split(LLAMA3_REGEX), byte_level(False, True, False)]}
            bos = "<|begin_of_text|>"
            j["post_processor"] = {"type": "Sequence", "processors": [
                byte_level(True, False, True),
                {"type": "TemplateProcessing",
                 "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                            {"Sequence": {"id": "A", "type_id": 0}}],
                 "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                          {"Sequence": {"id": "A", "type_id": 0}},
                          {"SpecialToken": {"id": bos, "type_id": 1}},
                          {"Sequence": {"id": "B", "type_id": 1}}],
                 "special_tokens": {bos: {"id": bos, "ids": [n], "tokens": [bos]}}}]}
            j["model"]["ignore_merges"] = True
            eot = "<|end_of_text|>"
        j["added_tokens"] = [added(s, n + i) for i, s in enumerate(specials)]
    j["decoder"] = byte_level(True, True, True)
    return Tokenizer.from_str(json.dumps(j)), eot


def main():
    kjv = kjv_text(60_000)
    for family in ["smollm2", "qwen2", "llama3"]:
        cases = dict(CASES)
        cases["specials_literal"] = SPECIALS_TEXT[family]
        # Every case once, one per line, twice over: the text `prepare` cuts into chunks.
        cases["document"] = "\n".join(list(cases.values()) * 2) + "\n" + kjv_text(3000)[1000:]
        tok, eot = make(family, kjv.splitlines() + list(cases.values()))
        d = OUT / family
        d.mkdir(parents=True, exist_ok=True)
        (d / "tokenizer.json").write_text(tok.to_str(pretty=False) + "\n", encoding="utf-8")
        expected = {
            "tokenizers_version": tokenizers.__version__,
            "family": family,
            "eot": eot,
            "eot_id": tok.token_to_id(eot),
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "cases": [{"name": k, "text": v, "ids": tok.encode(v).ids} for k, v in cases.items()],
        }
        # The pre-tokenizer's pieces (byte-level strings) of each case but the document, normalized
        # first, with no added tokens matched: a small vocabulary often gives a wrong split the
        # same ids, so the split is checked on its own.
        for case in expected["cases"]:
            if case["name"] == "document":
                continue
            text = case["text"]
            if tok.normalizer is not None:
                text = tok.normalizer.normalize_str(text)
            case["pieces"] = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
        (d / "expected.json").write_text(json.dumps(expected, ensure_ascii=True) + "\n")
        total = sum(p.stat().st_size for p in d.iterdir())
        print(f"{family}: {total} bytes, vocab {expected['vocab_size']}, eot {expected['eot_id']}")


if __name__ == "__main__":
    main()
