"""The King James Bible as training text for the tokenizer fixture generators: Debian's bible-kjv
(`bible -f "Gen1:1-Rev22:21"`) with the verse references stripped, as scripts/prepare_default.sh
does."""

import re
import subprocess


def kjv_text(limit):
    """The text's first `limit` characters."""
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    text = "\n".join(re.sub(r"^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ ", "", line)
                     for line in raw.splitlines())
    return text[:limit]
