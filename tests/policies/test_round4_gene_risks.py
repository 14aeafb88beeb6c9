"""A disease's risk or an embryo screening for it, said after a gene test's result, is that
genetic data, not a separate health finding (issue 33, round 4); a diagnosis stays health."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> list[str]:
    return sorted({f.kind for f in classify(text).findings})


def test_a_risk_or_a_screening_after_a_gene_result_is_genetic() -> None:
    assert _kinds("genetik test sonucum geldi, brca1 taşıyıcısıymışım, meme kanseri riskim yüksekmiş") == ["genetic"]
    assert _kinds("ikimiz de kistik fibrozis taşıyıcısıyız, doktor tüp bebekte embriyo taraması önerdi") == ["genetic"]


def test_a_diagnosis_after_a_gene_result_stays_health() -> None:
    text = "Oğlumun gen testinde DMD delesyonu çıktı, oğluma Duchenne tanısı kondu, fizik tedaviye başladık."
    assert "health" in _kinds(text)
    # a risk with no gene test before it is the person's health
    assert "health" in _kinds("annemin kalp krizi riski yüksekmiş, kardiyolog ilaç başladı")
