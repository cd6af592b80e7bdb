#!/usr/bin/env python3
"""Writes tests/reference/fixtures/spm_bpe/: a tokenizer ledgerlm trained (`prepare --tokenizer
bpe`, vocab 1000) and the ids that transformers' AutoTokenizer gives, on the Hugging Face export
of a run on it, for hard texts. CI has no transformers: tests/e2e/test_export_hf.cpp reads the
committed files (ExportHfBpe), exports a run prepared with this tokenizer and checks that
ledgerlm's encoder and tests/tools/hf_tokenizer_read.py on the export both give these ids.

Run once, offline, from the repository root, with a built ledgerlm and a virtual environment
that has the Hugging Face libraries (not part of the project's setup):

    python3 -m venv /tmp/hfvenv
    /tmp/hfvenv/bin/pip install tokenizers transformers sentencepiece protobuf
    LEDGERLM_BIN=build/ledgerlm /tmp/hfvenv/bin/python tests/reference/gen_spm_tokenizer_fixture.py

It needs `bible` (Debian's bible-kjv) for the training text. Before writing anything it checks,
for every text, that AutoTokenizer's ids equal sentencepiece's (with ledgerlm's rules: encoded
line by line, "\\n" its own id, a literal U+2581 as its three byte tokens) and
hf_tokenizer_read.py's, and that AutoTokenizer decodes them back to the text. Written with
transformers 5.25.0, tokenizers 0.23.3, sentencepiece 0.2.3 (the versions go into expected.json).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import sentencepiece
import tokenizers
import transformers
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import hf_tokenizer_read  # noqa: E402

OUT = os.path.join(ROOT, "tests", "reference", "fixtures", "spm_bpe")
BIN = os.environ.get("LEDGERLM_BIN", os.path.join(ROOT, "build", "ledgerlm"))

# Lines the training text holds often enough that their characters join the alphabet.
EXTRA_LINES = [
    "日本語のテキストと中文字符，混在しています。",
    "Café naïve façade — «quotes» and ‘single’ ones… 😀 👍",
    "\tindented\twith\ttabs  and  double  spaces   and trailing   ",
    "Numbers: 0 1 12 123 1234 3.14159 2,718 1e-9 0x7F 1900-2026",
]

CASES = {
    "whitespace_runs": "a  b   c    d\t\te \t \tf" + " " * 40 + "g\n" + " " * 17,
    "newlines": "\n\n\nline\n\n \n\t\nend\n",
    "crlf": "one\r\ntwo\r\n\r\nthree",
    "leading_spaces": "   In the beginning",
    "only_spaces": "     ",
    "only_newline": "\n",
    "empty": "",
    "digits": "0123456789 00 007 1234567890123 3.14159265 1,000,000 -42",
    "cjk_in_alphabet": "日本語のテキストと中文字符",
    "cjk_rare": "漢字仮名交じり文、한국어 텍스트, 繁體中文",
    "emoji": "😀👍🏽 👨‍👩‍👧 🇩🇪 ✓ ★",
    "accents": "Café naïve ﬁ ǅ e\u0301 A\u030a ß",
    "bytes_outside_vocab": "\x00\x01\x7f\u0080\u00a0\u00ad\ufeff\U0010ffff\u2028\u3000",
    "space_marker": "\u2581 \u2581\u2581the \u2581a\u2581b",
    "special_texts": "<|endoftext|> <unk> <0x41> <s></s> <|endoftext|><|endoftext|>",
    "tabs": "\t\t\tx\ty \t\tz\t",
    "punctuation": "Hello, world! (Yes?) [no]; {maybe}: a/b\\c 'q' \"d\" --- ...",
}


def kjv_text():
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    return "\n".join(re.sub(r"^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ ", "", line)
                     for line in out.split("\n"))


def run(*args):
    subprocess.run([BIN, *args], check=True, stdout=subprocess.DEVNULL)


def sentencepiece_ids(sp, text):
    """ledgerlm's bpe encoding (data/tokenizer_bpe.cpp) with the sentencepiece library."""
    nl = sp.piece_to_id("\n")
    byte = [sp.piece_to_id("<0x%02X>" % b) for b in range(256)]
    ids = []
    for k, line in enumerate(text.split("\n")):
        if k:
            ids.append(nl)
        for j, part in enumerate(line.split("\u2581")):
            if j:
                ids += [byte[b] for b in "\u2581".encode()]
            if part:
                ids += sp.encode(part)
    return ids


def main():
    kjv = kjv_text()
    work = tempfile.mkdtemp(prefix="spm_fixture_")
    try:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write(kjv[:300000])
            f.write("\n".join(EXTRA_LINES * 50) + "\n")
        data, hf = os.path.join(work, "data"), os.path.join(work, "hf")
        run("prepare", "--input", corpus, "--out", data, "--tokenizer", "bpe", "--vocab-size",
            "1000", "--threads", "1")
        run("train", "--data.dir", data, "--train.out_dir", work, "--train.name", "run",
            "--model.n_layer", "1", "--model.n_head", "1", "--model.n_embd", "16",
            "--model.block_size", "16", "--train.seq_len", "16", "--train.micro_batch", "2",
            "--train.max_steps", "1", "--train.eval_windows", "1", "--train.threads", "1")
        run("export", "--run", os.path.join(work, "run"), "--format", "hf", "--out", hf)

        cases = dict(CASES)
        cases["kjv_psalms"] = kjv[kjv.index("The LORD is my shepherd"):][:6000]
        cases["kjv_revelation_end"] = kjv.rstrip("\n")[-4000:]
        cases["extra_lines"] = "\n".join(EXTRA_LINES)
        rng = random.Random(20261207)
        alphabet = (list("the and of  \t\n\r.,;:'!?0123456789日本語😀éß\u0301\u2581\u00a0\x00")
                    + ["<|endoftext|>", "<unk>", "<0x41>", "LORD", "shall"])
        for i in range(40):
            cases["random_%02d" % i] = "".join(rng.choice(alphabet)
                                               for _ in range(rng.randint(1, 80)))

        tok = AutoTokenizer.from_pretrained(hf)
        sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(data, "tokenizer.model"))
        reader = hf_tokenizer_read.Reader(hf)
        out_cases = []
        for name, text in cases.items():
            ids = tok(text)["input_ids"]
            want = sentencepiece_ids(sp, text)
            assert ids == want, (name, ids[:20], want[:20])
            assert reader.encode(text) == ids, name
            assert tok.decode(ids) == text, (name, tok.decode(ids))
            out_cases.append({"name": name, "text": text, "ids": ids})

        os.makedirs(OUT, exist_ok=True)
        for f in ("tokenizer.model", "meta.json"):
            shutil.copyfile(os.path.join(data, f), os.path.join(OUT, f))
        expected = {
            "versions": {"transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__,
                         "sentencepiece": sentencepiece.__version__},
            "tokenizer_class": type(tok).__name__,
            "vocab_size": sp.get_piece_size(),
            "cases": out_cases,
        }
        with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("wrote %s: %d cases, vocab %d" % (OUT, len(out_cases), sp.get_piece_size()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
