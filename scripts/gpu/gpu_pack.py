#!/usr/bin/env python3
"""Packs scripts/gpu/gpu_check.sh's work directory into its output directory.

Only the output directory comes back from a GPU machine, and what comes back is limited (a few
files, each a few MiB), so the output holds at most five files, flat:

  summary.txt      one verdict line per stage (ok / failed / skipped / timeout, seconds)
  failures.txt     the stages that failed or timed out, each with the tail of its log
  environment.txt  what the environment stage wrote (build info, driver, CUDA libraries)
  logs.tar.xz      everything else in the work directory (logs.tar.gz when lzma is missing)

It is run after every stage, so a kill between stages still leaves the evidence so far. Every
file is written beside its final name and renamed over it, so a kill during packing leaves the
previous pack whole.

  gpu_pack.py WORK_DIR OUT_DIR [--max-bytes N]
"""
import io
import os
import sys
import tarfile

MAX_FILE_BYTES = 16 * 1024 * 1024
# A log larger than this goes into the archive as its last part only (the end of a log is what
# says what went wrong), so one runaway log cannot push the archive past the limit.
MAX_MEMBER_BYTES = 4 * 1024 * 1024
TAIL_LINES = 30
TOP_LEVEL = ("summary.txt", "environment.txt")


def write_atomic(path, data):
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def failures_text(work):
    """The failed or timed-out stages from summary.txt, each with the tail of its log."""
    out = []
    for line in read_text(os.path.join(work, "summary.txt")).splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[0] != "stage" or parts[2] not in ("failed", "timeout"):
            continue
        name = parts[1]
        out.append(line)
        log = read_text(os.path.join(work, "logs", name + ".log")).splitlines()
        out += ["    " + l for l in log[-TAIL_LINES:]]
        out.append("")
    return "\n".join(out) + ("\n" if out else "no stage failed\n")


def archive(work, out_dir, max_bytes):
    """Packs everything under WORK except the top-level files into one archive."""
    try:
        import lzma  # noqa: F401  (tarfile's xz needs it)
        # GPU_PACK_NO_XZ=1 takes the fallback here too (its test).
        xz = os.environ.get("GPU_PACK_NO_XZ", "") in ("", "0")
    except ImportError:
        xz = False
    mode, name = ("w:xz", "logs.tar.xz") if xz else ("w:gz", "logs.tar.gz")
    buf = io.BytesIO()
    notes = []
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for root, dirs, files in os.walk(work):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, work)
                if rel in TOP_LEVEL or os.path.islink(path) or not os.path.isfile(path):
                    continue
                size = os.path.getsize(path)
                if size <= MAX_MEMBER_BYTES:
                    tar.add(path, arcname=rel)
                    continue
                with open(path, "rb") as fh:
                    fh.seek(size - MAX_MEMBER_BYTES)
                    data = fh.read()
                info = tarfile.TarInfo(rel + ".tail")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                notes.append(f"{rel}: {size} bytes, archived its last {MAX_MEMBER_BYTES} only")
    data = buf.getvalue()
    if len(data) > max_bytes:
        notes.append(f"archive of {len(data)} bytes exceeds {max_bytes}: left out")
        return name, None, notes
    return name, data, notes


def main():
    args = sys.argv[1:]
    max_bytes = MAX_FILE_BYTES
    if "--max-bytes" in args:
        i = args.index("--max-bytes")
        max_bytes = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit("usage: gpu_pack.py WORK_DIR OUT_DIR [--max-bytes N]")
    work, out_dir = args
    os.makedirs(out_dir, exist_ok=True)
    name, data, notes = archive(work, out_dir, max_bytes)
    summary = read_text(os.path.join(work, "summary.txt"))
    if notes:
        summary += "".join(f"pack: {n}\n" for n in notes)
    write_atomic(os.path.join(out_dir, "summary.txt"), summary.encode()[-max_bytes:])
    write_atomic(os.path.join(out_dir, "failures.txt"), failures_text(work).encode()[-max_bytes:])
    env = read_text(os.path.join(work, "environment.txt")) or "environment stage has not run\n"
    write_atomic(os.path.join(out_dir, "environment.txt"), env.encode()[:max_bytes])
    for other in ("logs.tar.xz", "logs.tar.gz"):
        if other != name and os.path.exists(os.path.join(out_dir, other)):
            os.remove(os.path.join(out_dir, other))
    if data is not None:
        write_atomic(os.path.join(out_dir, name), data)


if __name__ == "__main__":
    main()
