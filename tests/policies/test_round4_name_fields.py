"""Names in records the tagger cannot read (issue 33, round 4): a booking's SURNAME/GIVEN with
its title, a log's guest or driver, an XML element's name parts, and a field's last word after
given names that is also a common word."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _names(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_name"]


def test_a_bookings_passengers() -> None:
    text = "PNR K7QZ2L TK2412 ESB-AMS\n1 AKSOY/SERKAN MR\n2 AKSOY/GÜLSÜM MRS\n3 AKSOY/EFE MSTR"
    assert _names(text) == ["AKSOY/SERKAN", "AKSOY/GÜLSÜM", "AKSOY/EFE"]
    assert _names("build input/output mr 14 merged, cache/warm ms 3") == []
    assert _names('{"pax": [{"name": "DOE/JOHN MR", "passport": "X0000000"}]}') == []  # a placeholder


def test_a_logs_guest_or_driver_and_xml_name_parts() -> None:
    assert _names("2026-03-02 check_in room=208 guest=Sevgi Nur Ilgaz nights=2") == ["Sevgi Nur Ilgaz"]
    assert _names("checkin;room=301;guest=Elif Nur Sancaktar;nights=1") == ["Elif Nur Sancaktar"]
    assert _names('ride.done id=r-771 driver="Hasan Yavuz" fare=212.50') == ["Hasan Yavuz"]
    xml = "<cac:Person><cbc:FirstName>Gülizar</cbc:FirstName><cbc:FamilyName>Ertekin</cbc:FamilyName></cac:Person>"
    assert _names(xml) == ["Gülizar", "Ertekin"]
