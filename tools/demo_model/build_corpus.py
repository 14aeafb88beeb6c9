"""Build the demo model's text corpus from what every machine with Python already has.

Sources, all offline:
- Python's standard library sources (which include pydoc's topic documentation,
  `pydoc_data/topics.py`), read from the running interpreter's stdlib folder;
- Turkish sentences from the gettext catalogs (`<prefix>/share/locale/tr/LC_MESSAGES/*.mo`)
  that Debian packages install: the translated strings of grep, sed, libc, apt, glib, ...

Each document is one Python file or one catalog's Turkish strings. A document goes to the
held-out split when a hash of its name says so, so the split is the same on every machine
that has the same files, whatever order the file system lists them in.
Writes train.txt and heldout.txt, documents separated by a form feed line (`SEP`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sysconfig
from collections.abc import Iterator
from pathlib import Path

SEP = "\n\f\n"
# Tests, generated tables and vendored installers teach the model little about Python.
SKIP_DIRS = {"site-packages", "test", "tests", "idle_test", "__pycache__", "encodings",
             "ensurepip", "lib2to3", "turtledemo", "config-3.11-x86_64-linux-gnu"}
LOCALE_ROOTS = ("/usr/share/locale", "/usr/local/share/locale", "/usr/share/vim")
MAX_PY_FILE_BYTES = 200_000


def heldout(name: str, one_in: int) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % one_in == 0


def python_documents(stdlib: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if any(part in SKIP_DIRS for part in rel.parts) or path.stat().st_size > MAX_PY_FILE_BYTES:
            continue
        if rel.as_posix() == "pydoc_data/topics.py":
            continue  # handled below: split into topics so it is not one 700 KB document
        try:
            yield f"py:{rel.as_posix()}", path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    topics = stdlib / "pydoc_data" / "topics.py"
    if topics.exists():
        namespace: dict[str, object] = {}
        exec(compile(topics.read_text(encoding="utf-8"), str(topics), "exec"), namespace)
        for key, text in sorted(namespace["topics"].items()):  # type: ignore[union-attr]
            yield f"doc:{key}", str(text)


def mo_strings(path: Path) -> list[str]:
    """Translated strings of a GNU .mo catalog (skipping the header entry)."""
    data = path.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">"
    _, count, orig_off, trans_off = struct.unpack(order + "4I", data[4:20])
    out: list[str] = []
    for i in range(count):
        olen, ooff = struct.unpack(order + "2I", data[orig_off + 8 * i: orig_off + 8 * i + 8])
        tlen, toff = struct.unpack(order + "2I", data[trans_off + 8 * i: trans_off + 8 * i + 8])
        if olen == 0:
            continue  # the header
        text = data[toff: toff + tlen].decode("utf-8", errors="replace")
        # Plural forms are NUL-separated; each is a sentence of its own.
        out.extend(s.strip() for s in text.split("\x00") if s.strip())
    return out


def turkish_documents(roots: tuple[str, ...] = LOCALE_ROOTS) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for root in roots:
        for path in sorted(Path(root).rglob("tr/LC_MESSAGES/*.mo")):
            lines = []
            for s in mo_strings(path):
                if s not in seen and "\ufffd" not in s:
                    seen.add(s)
                    lines.append(s)
            if lines:
                yield f"tr:{path.name}", "\n".join(lines)


def split_turkish(name: str, text: str, chunk_lines: int = 200) -> Iterator[tuple[str, str]]:
    """Big catalogs (libc, glib) become several documents, so the held-out split mixes them."""
    lines = text.split("\n")
    for i in range(0, len(lines), chunk_lines):
        yield f"{name}#{i // chunk_lines}", "\n".join(lines[i: i + chunk_lines])


def build(out_dir: Path, heldout_one_in: int = 30) -> dict[str, int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    train, held = [], []
    stats = {"py_docs": 0, "tr_docs": 0, "py_bytes": 0, "tr_bytes": 0}
    docs = list(python_documents(stdlib))
    for name, text in turkish_documents():
        docs.extend(split_turkish(name, text))
    for name, text in docs:
        kind = "tr" if name.startswith("tr:") else "py"
        stats[f"{kind}_docs"] += 1
        stats[f"{kind}_bytes"] += len(text.encode())
        (held if heldout(name, heldout_one_in) else train).append(text.replace("\f", " "))
    (out_dir / "train.txt").write_text(SEP.join(train), encoding="utf-8")
    (out_dir / "heldout.txt").write_text(SEP.join(held), encoding="utf-8")
    stats["train_bytes"] = (out_dir / "train.txt").stat().st_size
    stats["heldout_bytes"] = (out_dir / "heldout.txt").stat().st_size
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="build/demo_model", type=Path)
    args = ap.parse_args()
    print(build(args.out))


if __name__ == "__main__":
    main()
