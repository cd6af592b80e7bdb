"""What every figure-writing script here shares: matplotlib without a display, and a figure
written whole or not at all."""
import os
from pathlib import Path


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display on a server), imported only when a
    figure is drawn, so reports without figures do not need matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out):
    """Lays the figure out, writes it to `out` through a temporary file (never a half-written
    image), closes it and returns the file's name, for the report's link."""
    out = Path(out)
    fig.tight_layout()
    tmp = out.with_name(out.name + ".tmp" + out.suffix)
    fig.savefig(tmp)
    os.replace(tmp, out)
    pyplot().close(fig)
    return out.name
