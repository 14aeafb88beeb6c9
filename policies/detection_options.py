"""A tenant's personal-data detection settings: pure data, passed to `sensitivity.classify`.

The defaults are what a data-protection officer expects under KVKK: a person's name alone is
personal data (strict), while a company's identifiers (its VKN, its IBAN) and an institution's
contact points (444/0850/0800 lines, `kvkk@`/`ik@` mailboxes) are not.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class DetectionOptions:
    strict_names: bool = True  # a detected person's name alone makes a text sensitive
    legal_person_data: bool = False  # a company's VKN / IBAN / vehicle plate next to its trade name counts as personal
    institutional_contacts: bool = False  # call-centre numbers and role mailboxes count as personal


DEFAULT_OPTIONS = DetectionOptions()
