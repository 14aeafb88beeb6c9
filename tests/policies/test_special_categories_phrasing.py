"""Issue 33: KVKK special categories in more of the ways people phrase them (votes in any tense,
a party's name with a case ending, unions named X-İş / X-Sen, club and association offices,
peoples and disbelief), tied to a person; and the same vocabulary about groups, statistics or
an institution speaking of itself left alone. Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_category_two_sentences_after_the_name_is_that_persons() -> None:
    text = ("Yıl sonu değerlendirmesi: Figen Aral (Satış Uzmanı). Hedeflerini aştı. "
            "Yıl içindeki kemoterapi sürecine rağmen müşteri ziyaretlerini aksatmadı.")
    assert "health" in kinds(text)


def test_a_name_in_another_paragraph_does_not_tie_a_general_statement() -> None:
    text = ("Toplantı notu: Figen Aral sunum yaptı.\n\n"
            "Kemoterapi sürecinde bağışıklık düşer. Kalabalık ortamlardan uzak durulmalıdır.")
    assert "health" not in kinds(text)


def test_our_members_account_is_still_a_persons() -> None:
    assert "union" in kinds("Kardeşim geçen hafta sendikaya üye oldu, aidatı maaşından kesiliyor.")


def test_we_are_unionised_is_the_first_person() -> None:
    assert "union" in kinds("işyerinde 3 kişi sendikalıyız, patron bilmiyor")


def test_a_first_person_relative_outweighs_a_conditional_elsewhere_in_the_sentence() -> None:
    text = "kayınvalidem kemoterapiden sonra peruk kullanıyor, biri sorarsa konuyu değiştirin"
    assert "health" in kinds(text)


def test_ms_as_a_diagnosis() -> None:
    assert "health" in kinds("1988 doğumluyum, geçen ay MS tanısı aldım.")


def test_a_fever_in_general_advice_stays_routable() -> None:
    assert not classify("Çocuklarda ateşi yükselen durumlarda bol sıvı verilmelidir.").sensitive


def test_an_aorist_conditional_still_makes_a_statement_general() -> None:
    assert "appearance" not in kinds("Bir öğretmen çarşafla derse girerse ne olur, kurallar ne diyor?")


def test_an_exact_ethnonym_in_turkish_capitals() -> None:
    """'=süryani' keeps its ü exact, and its i also matches the capital İ ('SÜRYANİ')."""
    assert "ethnicity" in kinds("KİRACI ADAYIMIZ YUHANON ASLAN SÜRYANİ OLDUĞU İÇİN EV SAHİBİ VAZGEÇMİŞ.")
    assert "ethnicity" not in kinds("KURT SÜRÜSÜ KÖYE İNDİ, JANDARMA UYARDI.")


def test_my_after_a_vowel_is_the_first_person() -> None:
    assert "criminal" in kinds("18 yaşında hırsızlıktan sabıkam oldu, şimdi iş bulamıyorum.")
    assert "criminal" not in kinds("Sabıka kaydı e-Devlet üzerinden alınır.")


def test_a_request_about_my_own_case_is_not_a_general_question() -> None:
    named = "Merhaba, ben Nursel Akgül. Geçen hafta meme kanseri teşhisi kondu, dersleri 2 ay erteleyebilir miyim?"
    assert "health" in kinds(named)
    assert "health" not in kinds("Ayşe Hanım sordu. Şeker hastaları meyve yiyebilir mi?")


def test_an_age_in_apposition_or_a_described_individual_is_a_particular_person() -> None:
    assert "religion" in kinds('Şunu çevir: "Hasta Y. B., 71 yaşında, Yahudi cemaatinden olup koşer diyet istiyor."')
    assert "ethnicity" in kinds("Olay raporu: kamerada görünen şahıs Afrika kökenli, 1.90 boylarında.")
    # a biography's age, and ages of a group, stay general
    assert "health" not in kinds("Anadolu rock akımının öncülerindendir. 56 yaşında geçirdiği kalp krizi sonucu öldü.")
    assert "health" not in kinds("65 yaşındaki hastalarda kalp krizi riski artar.")


def test_a_carrier_of_an_infection_is_health_not_genetic() -> None:
    assert kinds("Hepatit B taşıyıcısı olduğum söylendi, bağışımı almadılar.") == {"health"}
    assert kinds("Ben talasemi taşıyıcısıymışım, nişanlım da test yaptıracak.") == {"genetic"}


def test_a_peoples_body_or_church_is_no_persons_origin() -> None:
    assert "ethnicity" not in kinds("Dedem Bislan, Kayseri Çerkes Derneği'nin kurucu üyelerindenmiş.")
    assert kinds("Komşumuz Agop Bey Ermeni Ortodoks, cenaze kilisede olacak.") >= {"religion"}
    assert "ethnicity" in kinds("Eşim Çerkes, ailesi Uzunyayla'dan gelmiş.")


def test_that_one_is_ties_the_term_right_before_it_only() -> None:
    assert "union" in kinds("Müdür, yeni gelen kasiyerin sendikaya üye olduğunu öğrenmiş.")
    general = "Uzmanlar, hipertansiyon ve diyabetin böbrek yetmezliğinin en sık iki nedeni olduğunu hatırlatıyor."
    assert "health" not in kinds(general)
