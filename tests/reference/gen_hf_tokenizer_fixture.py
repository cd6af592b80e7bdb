#!/usr/bin/env python3
"""Makes the fixture of the hf-bpe tokenizer test (tests/unit/data/test_data_tokenizer_hf.cpp):
a small GPT-2-style byte-level BPE tokenizer and the ids the Hugging Face `tokenizers` library
gives for varied text. Run once by hand; the tests read the committed output and never run this.

Writes tests/reference/fixtures/hf_tokenizer/:
  tokenizer.json   BPE model, ByteLevel pre-tokenizer (add_prefix_space false), ByteLevel decoder
                   and post-processor, <|endoftext|> as a special added token with the last id (as
                   in GPT-2); vocabulary 1000 learned tokens + <|endoftext|>
  vocab.json       the same vocabulary (with <|endoftext|>, as GPT-2's vocab.json has it)
  merges.txt       the same merges, "#version: 0.2" first, as GPT-2's
  expected.json    {"tokenizers_version", "eot_id", "vocab_size", "cases": [{"name", "text", "ids",
                   "pieces"}]}: the library's ids for each text (tokenizer.encode(text).ids,
                   default settings) and its pre-tokenizer's pieces of the whole text (byte-level
                   strings, pre_tokenizer.pre_tokenize_str(text)); the pieces test the split
                   pattern directly, since with a small vocabulary a wrong split often gives the
                   same ids

Training text: the King James Bible from the Debian package bible-kjv (`bible -f
"Gen1:1-Rev22:21"`, references stripped, the first 400,000 bytes) plus the hand-written cases below,
so that merges of non-ASCII bytes exist too.

Made with Python 3.11 and tokenizers 0.23.3 (expected.json records the version). To rerun:
  python3 -m venv /tmp/venv-hf && /tmp/venv-hf/bin/pip install tokenizers
  /tmp/venv-hf/bin/python tests/reference/gen_hf_tokenizer_fixture.py
"""
import json
import random
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from kjv_corpus import kjv_text

OUT = Path(__file__).resolve().parent / "fixtures" / "hf_tokenizer"
EOT = "<|endoftext|>"

# Hand-written cases: each a feature of the GPT-2 split pattern or of byte-level BPE.
CASES = {
    "plain": "In the beginning God created the heaven and the earth.",
    "contractions": "it's don't we're they've I'm you'll he'd",
    "contractions_upper": "IT'S DON'T WE'RE THEY'VE I'M YOU'LL HE'D and Peter'S",
    "contractions_odd": "'s' 'tis ''ll 'x 're're ' '' ''' 'S's",
    "numbers": "1 22 333 4444 3.14159 1,000,000 -7 +8 x2 2x 0x1F 12345678901234567890",
    "numbers_unicode": "\u0661\u0662\u0663 \u0968\u0969 \u2160\u2161 \u00bd \u00b2 \uff11\uff12 \u2460",
    "punctuation": "Hello!!! What?! (yes) [no] {maybe} ... --- *** @#$%^&* \"quoted\" `tick` ~/~",
    "spaces": "  two leading, three   inside,  trailing   ",
    "tabs": "\tone tab\t\ttwo tabs \t mixed\t",
    "newlines": "line one\nline two\r\nline three\r\n\r\n\n\nafter blank lines\n",
    "only_space": "   ",
    "only_newlines": "\n\n\n",
    "single_space": " ",
    "empty": "",
    "nbsp": "a\u00a0b \u00a0c\u00a0\u00a0d\u00a0 e \u00a0",
    "ideographic_space": "\u65e5\u672c\u3000\u8a9e \u3000x\u3000\u3000y",
    "line_separators": "x\u2028y\u2029z \u2028 w\u0085v\u000bu\u000ct",
    "other_spaces": "a\u2003b\u2009c\u202fd\u205fe\u1680f\u180eg\u200bh",
    "cjk": "\u5929\u5730\u7384\u9ec4\uff0c\u5b87\u5b99\u6d2a\u8352\u3002 \u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002",
    "korean": "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4",
    "emoji": "\U0001f642 \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd flags \U0001f1fa\U0001f1f8 \u2764\ufe0f",
    "combining": "e\u0301te\u0301 cafe\u0301 n\u0303 a\u0308\u0304 \u0301alone",
    "accented": "na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u00df \u00c6sir",
    "greek_cyrillic": "\u0391\u03bb\u03c6\u03b1 \u03b2\u03ae\u03c4\u03b1 \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
    "arabic_hebrew": "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd",
    "devanagari": "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "control_bytes": "nul\u0000soh\u0001del\u007fesc\u001b end",
    "eot_literal": "before<|endoftext|>after <|endoftext|> spaced<|endoftext|><|endoftext|>",
    "eot_partial": "<|endoftext| <|endoftext <endoftext|> <|endoftext|",
    "eot_edges": "<|endoftext|>start and end<|endoftext|>",
    "apostrophe_space": " 's ' s ''s",
    "mixed_classes": "abc123def!!!ghi   jkl\t\t456 789!?",
    "long_word": "antidisestablishmentarianism" * 3,
    "long_digits": "9" * 300,
    "long_space": " " * 300 + "x",
    "kjv_verse": "And God said, Let there be light: and there was light.",
}

# Characters for random strings: each class of the pattern, the contraction letters, and the
# boundaries between them.
ALPHABET = [" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "a", "Z",
            "s", "t", "r", "e", "v", "l", "m", "d", "S", "\u00e9", "\u4e2d", "1", "\u0663",
            "\u00bd", "\u2160", "'", "'", "!", ".", "-", "\U0001f600", "\u0301", "\u200b",
            EOT, "\u0000"]


def main():
    kjv = kjv_text(400_000)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(kjv.splitlines() + list(CASES.values()), trainer)
    tok.add_special_tokens([EOT])  # after training: the last id, as in GPT-2

    OUT.mkdir(parents=True, exist_ok=True)
    tok.save(str(OUT / "tokenizer.json"), pretty=False)
    spec = json.loads((OUT / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok.get_vocab(with_added_tokens=True)
    vocab_sorted = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    (OUT / "vocab.json").write_text(json.dumps(vocab_sorted, ensure_ascii=False), encoding="utf-8")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    (OUT / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")

    rng = random.Random(20240611)
    cases = dict(CASES)
    cases["kjv_excerpt"] = kjv_text(3_000_000)[2_000_000:2_006_000]  # text not trained on
    for k in range(150):
        cases[f"random_{k:03d}"] = "".join(rng.choice(ALPHABET)
                                           for _ in range(rng.randint(1, 24)))
    expected = {
        "tokenizers_version": tokenizers.__version__,
        "eot_id": tok.token_to_id(EOT),
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "cases": [{"name": name, "text": text, "ids": tok.encode(text).ids,
                   "pieces": [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]}
                  for name, text in cases.items()],
    }
    for case in expected["cases"]:  # the library's own round trip, as the C++ test expects
        assert tok.decode(case["ids"], skip_special_tokens=False) == case["text"], case["name"]
    (OUT / "expected.json").write_text(json.dumps(expected, ensure_ascii=True) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total} bytes), tokenizers {tokenizers.__version__}, "
          f"vocab {expected['vocab_size']}, eot {expected['eot_id']}")


if __name__ == "__main__":
    main()
