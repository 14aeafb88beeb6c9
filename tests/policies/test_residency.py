from __future__ import annotations

import pytest

from fairgate.policies.residency import assess, parse_classification_header


def test_header_parsing() -> None:
    assert parse_classification_header(None) is None
    assert parse_classification_header("  Sensitive ") == "sensitive"
    assert parse_classification_header("public") == "public"
    assert parse_classification_header("") is None
    with pytest.raises(ValueError, match="X-Data-Classification"):
        parse_classification_header("confidential")


def test_detector_finding_makes_sensitive_with_kinds() -> None:
    v = assess(["merhaba", "TC no 10000000146"])
    assert v.sensitive and v.kinds == ("tckn",) and v.reasons == ("detector",)


def test_clean_text_is_public() -> None:
    v = assess(["Bugün hava çok güzel."])
    assert not v.sensitive and v.kinds == () and v.reasons == ()


def test_public_header_never_loosens() -> None:
    assert assess(["TC no 10000000146"], header="public").sensitive
    assert assess(["hi"], data_residency="local_only", header="public").sensitive


def test_tenant_and_header_make_stricter() -> None:
    assert assess(["hi"], data_residency="local_only").reasons == ("tenant:local_only",)
    assert assess(["hi"], header="sensitive").reasons == ("header:sensitive",)
    # An unknown residency value in a tenant row counts as local_only.
    assert assess(["hi"], data_residency="lokal").sensitive


def test_classification_failure_fails_closed() -> None:
    v = assess(["harmless text"], patterns=["(unclosed"])
    assert v.sensitive and v.reasons == ("classification_failed",)


def test_tenant_keyword() -> None:
    assert assess(["Proje Kırmızı"], keywords=["kırmızı"]).kinds == ("keyword",)
