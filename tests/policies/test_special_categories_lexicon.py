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


@pytest.mark.parametrize("text, kind", [
    ("Oğlumun ateşi 38,7 oldu, gece iki kez kustu", "health"),
    ("kızım orta kulak iltihabı geçirdi, antibiyotiğe başladık", "health"),
    ("Babam Arveles ile Delix kullanıyor, eczaneden alabilir misiniz?", "health"),
    ("annem kemik yoğunluğu ölçümüne girdi, osteopeni çıktı", "health"),
    ("Muhasebedeki Serkan Bey merdivenden düşmüş, bileğinde kırık tespit edilmiş.", "health"),
    ("eşim 3 yıldır sertleşme sorunu yaşıyor, ürolojiye gideceğiz", "health"),
    ("Kayınpederim beş vakit namazında, ramazanda teravihi kaçırmaz.", "religion"),
    ("Yeğenim geçen yıl islama geçti, adını da değiştirdi.", "religion"),
    ("Komşumuz Berfin'in anadili Zazaca, annesi ise Türkmen.", "ethnicity"),
    ("Dayım 2019'da il genel meclisine aday olmuştu, kazanamadı.", "politics"),
    ("Vardiya amirimiz Metin Bey baştemsilci seçildi.", "union"),
    ("ben bu yıl derneğin saymanlığına seçildim", "association"),
    ("abim yıllardır eşinden gizli biriyle görüşüyormuş", "sexual_life"),
    ("Erkek arkadaşımla iki yıldır aynı evde kalıyoruz.", "sexual_life"),
    ("kuzenim haftada iki gün karakola imzaya gidiyor, yurt dışı yasağı da var", "criminal"),
    ("Depo şefimiz Murat Y. ısrarlı takip suçundan yargılanıyor.", "criminal"),
    ("Ablamın haplogrubu H çıkmış, anne hattı Anadolu'dan.", "genetic"),
    ("Telefonuma yüz kimliğimi tanıttım, bir de işaret parmağımın izini ekledim.", "biometric"),
    ("Kayıp ilanı: dedemiz Hasan, kısa boylu, bıyıklı, lacivert montlu.", "appearance"),
])
def test_added_words_tied_to_a_person(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "Seksen yaşındaki binanın cephesi yenilendi.",
    "İki yolun kesişme noktasına trafik ışığı konacak.",
    "Proje ekibi işi kesin olarak yürütecek, sonuçları cuma bildireceğiz.",
    "Profesyonel mutfak ekipmanlarında kampanya başladı.",
    "Esmeralda pastanesi pazar günleri kapalıdır.",
])
def test_added_stems_leave_everyday_words_alone(text: str) -> None:
    assert not classify(text).findings


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


@pytest.mark.parametrize("text", [
    "Müdürümüz bu kararı bugün veremez, yarın tekrar sorun dedi.",
    "Ben o konuda karar veremedim, eşim de izin veremeyiz diyor.",
    "Annem bayramda sakatat yemez.",
    "Kocası onu dövmeye başlamış, komşular polisi aramış.",
    "Babam samanlığa gitti, saman balyalarını taşıyor.",
])
def test_verbs_and_words_that_begin_like_a_term_are_none(text: str) -> None:
    assert not {"health", "appearance", "religion"} & kinds(text)


def test_the_terms_those_words_begin_like_still_count() -> None:
    assert "health" in kinds("Babam gençken vereme yakalanmış, aylarca yatmış.")
    assert "appearance" in kinds("Kuzenimin kolunda büyük bir dövme var.")


@pytest.mark.parametrize("text", [
    "Eniştem iki yıldır başka bir kadınla görüşüyormuş, teyzem dün öğrendi.",
    "Kuzenim nişanlısıyla aynı evde kalıyormuş, ailesi bilmiyor.",
    "Ablam boşandıktan sonra iş arkadaşıyla birlikte olmaya başladı.",
    "Evlenmek istiyoruz ama ikimiz de erkeğiz, burada nikâh kıyılmıyor.",
])
def test_an_affair_a_same_sex_couple_and_living_together(text: str) -> None:
    assert "sexual_life" in kinds(text)


def test_asking_for_someone_else_on_the_line_is_no_affair() -> None:
    assert "sexual_life" not in kinds("Başka biriyle görüşmek istiyorum, yetkiliyi bağlar mısınız?")


def test_a_collective_agreement_is_no_ones_membership() -> None:
    # a workplace's contract, said of members and non-members alike
    assert "union" not in kinds("Konu: Toplu sözleşme görüşmesi\n\nMerhaba Serdar Bey, perşembe 14:00 uygun mu?")
    assert "union" in kinds("Eşim sendika üyesi, toplu sözleşme zammını bekliyor.")


@pytest.mark.parametrize("text", [
    "Oğlum dün okulda sara nöbeti geçirdi, öğretmeni ambulans çağırmış.",
    "Komşumuz Saniye teyze merdivenden düşüp bacağını kırdı.",
    "Kızımın aşıları eksik, aile hekimi randevu verdi.",
    "Babamın uyku problemi yüzünden geceleri kimse uyuyamıyor.",
    "Hasta Ferit Onat: hiperlipidemi, statin başlandı.",
    "Eşimin genital siğili için kriyoterapi önerdiler.",
])
def test_third_round_health_words_tied_to_a_person(text: str) -> None:
    assert "health" in kinds(text)


def test_third_round_health_words_in_general_text_stay_general() -> None:
    assert "health" not in kinds("Siğil nedir? Genellikle virüslerle bulaşır ve kriyoterapi ile tedavi edilebilir.")
