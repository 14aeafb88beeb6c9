"""Peer adapter: `kvkk` (checksum-verified TCKN/IBAN/VKN/card/phone/e-mail/plate finder).
Reads JSON-encoded texts, one per line, on stdin; writes one JSON list of [kind, start, end]
per line in our kind names. Runs in the peer's own venv."""

import json
import sys

from kvkk import scan_text

KINDS = {"tckn": "tckn", "iban": "iban", "credit_card": "card", "vkn": "vkn", "phone": "phone",
         "email": "email", "plate": "plate"}


def main() -> None:
    for line in sys.stdin:
        text = json.loads(line)
        starts = [0]
        for row in text.splitlines(keepends=True):
            starts.append(starts[-1] + len(row))
        out = []
        for f in scan_text(text):
            if f.kind in KINDS:
                base = starts[f.line - 1]
                out.append([KINDS[f.kind], base + f.match.start, base + f.match.end])
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
