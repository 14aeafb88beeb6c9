"""Issue 33, second round: the words added to `data/special/*.txt` from the language (everyday
illnesses, injuries, procedures, departments, drug names and brands sold in Türkiye; practice of
a faith; peoples and mother tongues; party roles and candidacy; union and association offices;
orientation and partners; probation, trials and offences; genetic tests; biometric enrolment;
dress and description), each tied to a person; and the guards that keep new stems from eating
everyday words ("seksen", "kesişme", "Papazoğlu", "yürütecek") or hiding another trigger.
Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_surname_that_starts_with_a_clergy_word_is_no_religion() -> None:
    assert "religion" not in kinds("Kiraya veren: Yorgo Papazoğlu, kiracı: Selin Aksu.")


def test_a_new_term_does_not_hide_the_term_or_address_after_it() -> None:
    # "y dna" would start inside "My" and swallow "DNA test"; "boylu" inside a surname the e-mail
    assert "genetic" in kinds("My DNA test came back positive.")
    assert "email" in kinds("iletişim: seda.uzunboylu@ornek.com")


def test_a_high_or_low_sugar_said_of_someone() -> None:
    assert "health" in kinds("sabah ölçtüm şekerim yüksek çıktı, doktora gidicem")


def test_a_word_that_only_begins_like_a_term_is_none() -> None:
    # "!engelliyo": the verb "engelliyor" (blocks) is no disability, "engelliyim" still is
    assert "health" not in kinds("Komşum site grubunda herkesi tek tek engelliyor, bıktık.")
    assert "health" in kinds("Komşum engelliyim diye otoparkta yer istedi.")


# (text, kind, whether it is found): words and verbs that only begin like a term ("veremez",
# "dövmeye", "saman") are none; the terms they begin like, and the new sexual-life phrasings, are.
PHRASINGS = [
    ("Müdürümüz bu kararı bugün veremez, yarın tekrar sorun dedi.", "health", False),
    ("Ben o konuda karar veremedim, eşim de izin veremeyiz diyor.", "health", False),
    ("Annem bayramda sakatat yemez.", "health", False),
    ("Kocası onu dövmeye başlamış, komşular polisi aramış.", "appearance", False),
    ("Babam samanlığa gitti, saman balyalarını taşıyor.", "religion", False),
    ("Babam gençken vereme yakalanmış, aylarca yatmış.", "health", True),
    ("Kuzenimin kolunda büyük bir dövme var.", "appearance", True),
    ("Eniştem iki yıldır başka bir kadınla görüşüyormuş, teyzem dün öğrendi.", "sexual_life", True),
    ("Kuzenim nişanlısıyla aynı evde kalıyormuş, ailesi bilmiyor.", "sexual_life", True),
    ("Ablam boşandıktan sonra iş arkadaşıyla birlikte olmaya başladı.", "sexual_life", True),
    ("Evlenmek istiyoruz ama ikimiz de erkeğiz, burada nikâh kıyılmıyor.", "sexual_life", True),
    ("Başka biriyle görüşmek istiyorum, yetkiliyi bağlar mısınız?", "sexual_life", False),
    # a collective agreement is a workplace's contract, said of members and non-members alike
    ("Konu: Toplu sözleşme görüşmesi\n\nMerhaba Serdar Bey, perşembe 14:00 uygun mu?", "union", False),
    ("Eşim sendika üyesi, toplu sözleşme zammını bekliyor.", "union", True),
    # the third round's health words, tied to a person, and in general text
    ("Oğlum dün okulda sara nöbeti geçirdi, öğretmeni ambulans çağırmış.", "health", True),
    ("Komşumuz Saniye teyze merdivenden düşüp bacağını kırdı.", "health", True),
    ("Kızımın aşıları eksik, aile hekimi randevu verdi.", "health", True),
    ("Babamın uyku problemi yüzünden geceleri kimse uyuyamıyor.", "health", True),
    ("Hasta Ferit Onat: hiperlipidemi, statin başlandı.", "health", True),
    ("Eşimin genital siğili için kriyoterapi önerdiler.", "health", True),
    ("Siğil nedir? Genellikle virüslerle bulaşır ve kriyoterapi ile tedavi edilebilir.", "health", False),
]


@pytest.mark.parametrize(("text", "kind", "found"), PHRASINGS)
def test_what_begins_like_a_term_and_the_new_phrasings(text: str, kind: str, found: bool) -> None:
    assert (kind in kinds(text)) == found
    if not found:  # nor any other category the word begins like
        assert not {"health", "appearance", "religion"} & kinds(text)
