#!/usr/bin/python3
"""The unigram and bigram baselines of a prepared data directory (val split): the counting lives
in scripts/ngram_baselines.py, which scripts/study_report.py shares; this name is kept for the
experiment scripts that call it.

Usage: scripts/exp/bigram_baseline.py DATA_DIR [--alpha 1.0] [--json]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import ngram_baselines  # noqa: E402

if __name__ == "__main__":
    sys.exit(ngram_baselines.main("bigram_baseline"))
