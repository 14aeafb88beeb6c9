"""Peer adapter: `ayikla` (name, phone, TCKN, IBAN and e-mail lists). It returns strings, not
offsets: each is located in the text (phones, given in E.164, by their last ten digits).
Same protocol as `peer_kvkk.py`."""

import json
import re
import sys

from ayikla import bul

KINDS = {"isimler": "person_name", "tckn": "tckn", "iban": "iban", "emailler": "email"}


def locate(text: str, value: str) -> list[list[int]]:
    return [[m.start(), m.end()] for m in re.finditer(re.escape(value), text)]


def phone_spans(text: str, e164: str) -> list[list[int]]:
    digits = re.sub(r"[^0-9]", "", e164)[-10:]
    pattern = r"[ .\-()]*".join(digits)
    return [[m.start(), m.end()] for m in re.finditer(pattern, text)]


def main() -> None:
    for line in sys.stdin:
        text = json.loads(line)
        found = bul(text)
        out = []
        for key, kind in KINDS.items():
            for value in found.get(key, []):
                out += [[kind, s, e] for s, e in locate(text, str(value))]
        for phone in found.get("telefonlar", []):
            out += [["phone", s, e] for s, e in phone_spans(text, str(phone))]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
