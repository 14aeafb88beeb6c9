"""Issue 33: KVKK special categories in more of the ways people phrase them (votes in any tense,
a party's name with a case ending, unions named X-İş / X-Sen, club and association offices,
peoples and disbelief), tied to a person; and the same vocabulary about groups, statistics or
an institution speaking of itself left alone. Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


@pytest.mark.parametrize("text, kind", [
    ("dayım yıllardır aynı partiye oy veriyo, değiştirmez", "politics"),
    ("kuzenim bu seçimde hiç oy vermedim dedi, küsmüş siyasete", "politics"),
    ("Yengem geçen ay İyi Parti'ye üye oldu.", "politics"),
    ("Komşumuz Saffet Bey ilçe yöneticisi olarak seçim bürosunda çalışıyor.", "politics"),
    ("Babam 90'larda ANAP'çıydı, şimdi hiçbirini sevmiyor.", "politics"),
    ("Forklift operatörümüz Nakliyat-İş üyesi, aidatı bordrodan kesiliyor.", "union"),
    ("ben geçen yıl Basın-İş'e kayıtlı oldum", "union"),
    ("Annem 10 yıldır kulübümüzün en eski üyesi.", "association"),
    ("Selam Tülin, seni kulübün yeni dönem başkanlığına aday göstermek istiyoruz.", "association"),
    ("Muhasebeci arkadaşımız Gagauz, Komrat'tan gelmiş.", "ethnicity"),
    ("eşim hazara, kabil'den kaçıp gelmişler", "ethnicity"),
    ("Ablamlara Arap oldukları için evi vermediler.", "ethnicity"),
    ("Ben artık hiçbir dine inanmıyorum, nüfus kaydımı değiştirmek istiyorum.", "religion"),
    ("abim bi cemaate girdi galiba, akşamları sohbete gidiyo", "religion"),
    ("Annemle babam geçen ay umreye gittiler, annem dönünce örtündü.", "religion"),
    ("Komşunun kızı o çocukla iki yıldır birlikteymiş, ailesi yeni öğrenmiş.", "sexual_life"),
    # a first person's locative ("ekibindeyim") in the term's clause; "herkesi" speaks of others
    ("Ben Sakarya'daki Gürcü Kültür Derneği'nde folklor ekibindeyim; gelen herkesi bekleriz.", "association"),
    ("sınıfa yeni gelen kız başörtüsüyle geliyo, herkes bir şey soruyor", "appearance"),
    ("Bebeğinizin yenidoğan taramasında hipotiroidi şüphesi saptanmıştır.", "health"),
    ("Eski nişanlım herkese benim lezbiyen olduğumu anlatmış.", "sexual_life"),  # told everyone: no generality
    # someone described by where they are, in the term's own clause
    ("Bir şey danışacağım: kasadaki yeni kız başörtüsüyle çalışıyor, bazı müşteriler soruyor.", "appearance"),
])
def test_more_phrasings_tied_to_a_person(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "Oy verme işlemi saat 17.00'de sona erecek; sandık kurulları sayıma başlayacak.",
    "Kızımın doğum günü partisine 15 çocuk gelecek, pasta önerisi olan var mı?",
    "Sendikamız, ücret artışının enflasyonun altında kaldığını ve yeni görüşme talep ettiğini açıkladı.",
    "Bakanlığın istatistiklerine göre hükümlülerin büyük bölümü mala karşı suçlardan ceza almış.",
    "Emniyetin açıkladığı bilançoya göre şüphelilerin 9'u tutuklandı.",
    "Umre turu fiyatları bu yıl yüzde 40 arttı.",
    "Gagauzlar Moldova'nın güneyinde yaşayan Türkçe konuşan bir topluluktur.",
    "Lityum tedavisinde tremor sık görülen bir yan etkidir.",  # "-yum" is no first person's "-(y)Im"
    "Yeni gelen öğrencilere başörtüsü serbestisi hakkında bilgi verilir.",
    "Bayrama özel tüm başörtüsü modellerinde indirim var.",  # "indirim" is a noun, not "I lower"
    "Kurban kesim noktaları ilçe müftülüğünce duyuruldu.",  # "kesim" is a noun, not "my ..."
    "Hasta ziyaretinde kurban kestirmek caiz mi?",  # nor is "caiz" a "we are"
    "Derneğimizin amacı, köylerdeki kız çocuklarının okula devamını sağlamaktır.",  # girls, not a girl
    "Yeni gelen öğretmen kadrosu, engelli öğrencilerle çalışmak üzere eğitim aldı.",  # a staff, in another clause
])
def test_general_statements_stay_routable(text: str) -> None:
    assert not classify(text).sensitive


@pytest.mark.parametrize("text", [
    "HASTA: SEVİM ORAL | D.T.: 12.04.1957 | KAN: 0 RH+ | SERVİS: DAHİLİYE",
    "Ad Soyad: Kerim Aslan\nKan grubu: B Rh-",
])
def test_a_blood_group_in_a_record(text: str) -> None:
    assert "health" in kinds(text)


def test_a_category_two_sentences_after_the_name_is_that_persons() -> None:
    text = ("Yıl sonu değerlendirmesi: Figen Aral (Satış Uzmanı). Hedeflerini aştı. "
            "Yıl içindeki kemoterapi sürecine rağmen müşteri ziyaretlerini aksatmadı.")
    assert "health" in kinds(text)


def test_a_name_in_another_paragraph_does_not_tie_a_general_statement() -> None:
    text = ("Toplantı notu: Figen Aral sunum yaptı.\n\n"
            "Kemoterapi sürecinde bağışıklık düşer. Kalabalık ortamlardan uzak durulmalıdır.")
    assert "health" not in kinds(text)


@pytest.mark.parametrize("text, kind", [
    ("KAYIP: oğlumuz Deniz 12 yaşında, sağ kolunda dövme var, gözlüklü, 1.50 boylarında.", "appearance"),
    ("kayınvalidem kemoterapiden sonra peruk kullanıyo, kimse sormasın", "appearance"),
    ("ben 2 yıldır kapalıyım, eski fotoğrafımı sitede kullanmayın", "appearance"),
    ("evet, o kız sevgilim, adı lavin", "sexual_life"),
    ("aslında iki cinse de ilgi duyuyorum, kimseye söylemedim", "sexual_life"),
    ("Babamın sesli imzasını kaydettiler, artık telefonda sesiyle onay veriyor.", "biometric"),
])
def test_descriptions_partners_and_signatures_tied_to_a_person(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "Dövme yaptırmadan önce cildinizin durumunu bir dermatoloğa danışmalısınız.",
    "Dinamik imza, kalemin basıncını ve hızını ölçen bir doğrulama yöntemidir.",
])
def test_the_same_words_in_general_text_stay_routable(text: str) -> None:
    assert not classify(text).sensitive


@pytest.mark.parametrize("text", [
    "Denetimlerde 3 bin 412 sürücüye alkollü araç kullanmaktan işlem yapıldı.",
    "Cezaevlerinde 290 bin kişi var; bunların 41 bini tutuklu, kalanı hükümlü.",
    "Hükümlü ve tutuklu yakınlarının dikkatine: açık görüş günleri ayda bir kezdir.",
    "Bağış yapmak isteyenler için dernek hesaplarımız aşağıdadır.",
    "Kocaeli'deki yasa dışı bahis operasyonunda 23 şüpheli yakalandı, 11'i tutuklandı.",
    "Davada yüzlerce sanık yargılandı, karar yıllar sonra açıklandı.",
    "Bir lojistik firmasında 35 işçi sendikaya üye oldukları için işten çıkarıldı.",
])
def test_counts_notices_and_a_body_speaking_for_itself_stay_routable(text: str) -> None:
    assert not classify(text).sensitive


def test_our_members_account_is_still_a_persons() -> None:
    assert "union" in kinds("Kardeşim geçen hafta sendikaya üye oldu, aidatı maaşından kesiliyor.")


def test_we_are_unionised_is_the_first_person() -> None:
    assert "union" in kinds("işyerinde 3 kişi sendikalıyız, patron bilmiyor")


def test_a_first_person_relative_outweighs_a_conditional_elsewhere_in_the_sentence() -> None:
    text = "kayınvalidem kemoterapiden sonra peruk kullanıyor, biri sorarsa konuyu değiştirin"
    assert "health" in kinds(text)


def test_ms_as_a_diagnosis() -> None:
    assert "health" in kinds("1988 doğumluyum, geçen ay MS tanısı aldım.")


@pytest.mark.parametrize("text, expected", [
    ("Hasta: Cemile Arslan\nYatış nedeni: Toplum kökenli pnömoni", False),
    ("Başroldeki tiyatro kökenli oyuncu filmi taşıyor, eşim de çok beğendi.", False),
    ("Depodaki forklift operatörümüz Oromo kökenli, Amharca konuşuyor.", True),
    ("Eşim Kürt kökenli, ailesi Muş'tan.", True),
])
def test_kokenli_is_an_origin_only_after_a_people_or_a_region(text: str, expected: bool) -> None:
    assert ("ethnicity" in kinds(text)) is expected


@pytest.mark.parametrize("text, kind", [
    ("eşim 30 haftalık hamile, doktor plasenta previa dedi, yatması gerekiyormuş", "health"),
    ("Sigortalı: Kemal Aydın. Talep: sağ diz artroskopisi, ön onay bekleniyor.", "health"),
    ("hocam oğlum bugün gelemeyecek, ateşi çıktı, doktora götürüyorum", "health"),
    ("Babalık testi sonucu: Tuncay'ın biyolojik babası olma olasılığı %99,9 çıktı.", "genetic"),
    ("Eşim yarın amniyosentez olacak, çok korkuyoruz.", "health"),  # a procedure, not a gene's result
])
def test_more_health_and_genetic_phrasings(text: str, kind: str) -> None:
    assert kind in kinds(text)


def test_a_fever_in_general_advice_stays_routable() -> None:
    assert not classify("Çocuklarda ateşi yükselen durumlarda bol sıvı verilmelidir.").sensitive


@pytest.mark.parametrize("text", [
    "yeni gelen fizik öğretmeni çarşafla derse giriyo diye veliler şikayet etmiş",  # "derse": a lesson's dative
    "Komşunun babası da sarıkla geziyor artık.",  # "sarıkla": the turban with an ending
])
def test_religious_dress_of_a_person_with_a_nouns_ending(text: str) -> None:
    assert "appearance" in kinds(text)


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


@pytest.mark.parametrize("text, kind", [
    ("Annem Lazdır, babam da Hemşinli.", "ethnicity"),
    ("Rahmetli babam koyu Ecevitçiydi, evde hep onun posterleri asılıydı.", "politics"),
    ("Dedem Hanefi, anneannem Şafii; bayramda hep şakalaşırlar.", "religion"),
    ("Kayıp: oğlumuz Emir, üstünde kırmızı kapüşonlu var.", "appearance"),
    ("Hacer Hanım'ın yüz doğrulaması turnikede eşleşmedi.", "biometric"),
])
def test_words_added_to_the_lexicons_tied_to_a_person(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "Hac kuraları bugün çekiliyor, sonuçlar müftülüklerde ilan edilecek.",
    "Lazım olan belgeleri yarın getiririm.",
    "Sakal tıraşı 150 TL, saç kesimi 300 TL.",
])
def test_the_added_words_in_general_text_stay_routable(text: str) -> None:
    assert not classify(text).findings


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


@pytest.mark.parametrize("text, kind, said", [
    # the sentence that says the term, not the one word
    ("Yatak 3 – Sabri Tunç, 68 y. Kalp yetmezliği ile izleniyor, idrar çıkışı azaldı.", "health",
     "Kalp yetmezliği ile izleniyor, idrar çıkışı azaldı"),
    # a record's line ends it
    ("Personel: Sena Akgün\nTanı: astım, inhaler kullanıyor\nVardiya: gece", "health",
     "Tanı: astım, inhaler kullanıyor"),
    # the same category later in the passage joins it, whatever category stands between
    ("Kayınbiraderim tarikata girdi, sarık sarmaya başladı. Nakşibendi bir dergâha bağlıymış.", "religion",
     "Kayınbiraderim tarikata girdi, sarık sarmaya başladı. Nakşibendi bir dergâha bağlıymış"),
])
def test_a_finding_spans_the_sentence_that_says_it(text: str, kind: str, said: str) -> None:
    spans = [text[f.start : f.end] for f in classify(text).findings if f.kind == kind]
    assert spans == [said]
