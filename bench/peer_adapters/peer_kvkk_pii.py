"""Peer adapter: `kvkk-pii` (regex layer; its NER and GLiNER layers need model downloads and
are left off, as they would be offline). Same protocol as `peer_kvkk.py`."""

import json
import sys

from kvkk_pii import PiiDetector

KINDS = {"TC_KIMLIK": "tckn", "VKN": "vkn", "IBAN_TR": "iban", "PASAPORT_TR": "passport", "TELEFON_TR": "phone",
         "EMAIL": "email", "PLAKA_TR": "plate", "KREDI_KARTI": "card", "ADRES": "person_address", "SGK_NO": "sgk",
         "KISI_ADI": "person_name", "SAGLIK_VERISI": "health", "DINI_INANC": "religion",
         "SIYASI_GORUS": "politics", "SENDIKA_UYELIGII": "union", "BIYOMETRIK_VERI": "biometric"}


def main() -> None:
    detector = PiiDetector()
    for line in sys.stdin:
        text = json.loads(line)
        result = detector.analyze(text)
        print(json.dumps([[KINDS[e.entity_type], e.start, e.end] for e in result.entities
                          if e.entity_type in KINDS]), flush=True)


if __name__ == "__main__":
    main()
