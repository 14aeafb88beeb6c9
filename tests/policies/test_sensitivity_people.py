"""Issue 33: special categories tied to a person (and general statements left alone), the
tenant knobs, SGK numbers, tax numbers by column, institutional numbers and mailboxes,
obfuscated e-mails and postal addresses as people write them. Sentences written for these
tests, the way people write them."""

from __future__ import annotations

import random

from stdnum.tr import tckimlik, vkn

from fairgate.policies.detection.checksums import tckn_valid
from fairgate.policies.detection.identifiers import vkn_valid
from fairgate.policies.detection_options import DEFAULT_OPTIONS, DetectionOptions
from fairgate.policies.sensitivity import classify


def found(text: str, options: DetectionOptions = DEFAULT_OPTIONS) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in classify(text, options=options).findings]


def kinds(text: str) -> set[str]:
    return {k for k, _ in found(text)}


def test_strict_mode_makes_a_name_alone_sensitive_and_can_be_turned_off() -> None:
    text = "Yarınki sunumu Tuğba Erkan yapacak."
    assert found(text) == [("person_name", "Tuğba Erkan")]
    assert found(text, DetectionOptions(strict_names=False)) == []
    with_phone = "Yarınki sunumu Tuğba Erkan yapacak, cep 0532 418 20 77."
    assert {k for k, _ in found(with_phone, DetectionOptions(strict_names=False))} == {"person_name", "phone"}


def test_institutional_numbers_and_role_mailboxes_count_only_when_the_tenant_says_so() -> None:
    text = "Şikâyetleriniz için 0850 460 12 12'yi arayın ya da kvkk@ornekenerji.com.tr adresine yazın."
    assert found(text) == []
    both = DetectionOptions(institutional_contacts=True)
    assert found(text, both) == [("phone", "0850 460 12 12"), ("email", "kvkk@ornekenerji.com.tr")]
    assert kinds("Bana 0533 771 45 08'den ya da selin.oz@gmail.com'dan ulaşabilirsiniz.") == {"phone", "email"}


def test_an_institutions_fixed_line_is_its_own_but_a_named_persons_is_not() -> None:
    notice = "Nöbetçi eczane: Şifa Eczanesi, İstasyon Caddesi No:41 — Tel 0266 243 11 90."
    assert [k for k, _ in found(notice)] == []
    assert ("phone", "0266 243 11 90") in found(notice, DetectionOptions(institutional_contacts=True))
    record = "ALICI: Takuhi Bakırcıyan\nNot: evde yoksa kapıcıya bırakın, aramadan önce 0212 231 58 94"
    assert ("phone", "0212 231 58 94") in found(record)
    assert ("phone", "0312 418 22 90") in found("Bilgi: 0312 418 22 90")  # no institution's word


def test_a_list_of_branch_lines_is_an_institutions() -> None:
    table = "sube;telefon\nKızılay;0312 418 22 10\nBatıkent;0312 255 40 41"
    assert found(table) == []
    assert len(found(table, DetectionOptions(institutional_contacts=True))) == 2
    # one line alone, or two next to a person's name, stay personal
    assert ("phone", "0312 418 22 10") in found("Bilgi: 0312 418 22 10")
    two = "Kiracı Oya Demirkol\nev: 0312 418 22 10, iş: 0312 255 40 41"
    assert [k for k, _ in found(two)].count("phone") == 2


def test_a_role_among_a_mailboxs_parts_is_a_teams_but_not_at_a_free_provider() -> None:
    text = "Bilgi İşlem: bt-destek@ornekyapi.com.tr, bölüm: enstitu@deu.edu.tr"
    assert found(text) == []
    assert ("email", "deryacakir_muhasebe@hotmail.com") in found("Bana deryacakir_muhasebe@hotmail.com adresinden ulaşın.")


def test_values_in_a_unit_tests_calls_are_fixtures() -> None:
    code = "it('masks', () => expect(maskEmail('ahmet@example.com')).toBe('a****@example.com'));"
    assert found(code) == []
    assert found("def test_format():\n    assert gecerli_mi('U12345678')") == []
    assert ("email", "ahmet@example.com") in found("Müşteri ahmet@example.com adresinden yazdı.")


def test_a_companys_vkn_and_iban_are_legal_person_data() -> None:
    text = "Satıcı: Demirtaş Kırtasiye Ltd. Şti.\nVKN: 4869338171\nIBAN: TR330006100519786457841326"
    assert found(text) == []
    assert {k for k, _ in found(text, DetectionOptions(legal_person_data=True))} == {"vkn", "iban"}


def test_sgk_and_retirement_numbers_in_context() -> None:
    assert found("Emekli sicil numaram 11-203948, maaşım yatmadı.") == [("sgk", "11-203948")]
    assert ("sgk", "3410 2288 1930") in found("SGK sicil no: 3410 2288 1930 olan işçimizin girişi yapıldı.")
    assert found("Personel sicil no 20417, izin formu ektedir.") == []


def test_tax_numbers_and_sgk_numbers_by_their_column() -> None:
    csv = "ad;soyad;vergi_no;sgk_no\nFerhat;Oral;4869338171;3410228819301"
    got = found(csv)
    assert ("vkn", "4869338171") in got and ("sgk", "3410228819301") in got
    sql = "UPDATE musteri SET vkn = '4869338171' WHERE id = 88;"
    assert found(sql) == [("vkn", "4869338171")]


def test_more_institutions_mailboxes_are_no_ones() -> None:
    assert found("Yatırımcı ilişkileri: yatirimci@ornekenerji.com.tr, bağış: bagis@egitimvakfi.org.tr") == []


def test_a_firms_kep_box_is_no_ones_but_a_lawyers_is_hers() -> None:
    assert found("Resmi yazışmalar için KEP: marmaraboya@hs02.kep.tr") == []
    assert found("Tebligat için KEP adresim av.nihan.ozkaya@hs01.kep.tr") == [("email", "av.nihan.ozkaya@hs01.kep.tr")]


def test_obfuscated_email_in_turkish_words() -> None:
    text = "mail adresim: hakan nokta ersoy at gmail nokta com"
    assert kinds(text) == {"email"}


def test_an_address_in_capitals_after_a_name() -> None:
    text = "BORÇLU: SABRİ DEMİRKOL\nADRES: GÜZELYALI MAH. 1042. CAD. NO:7 D:3 PENDİK/İSTANBUL"
    assert any(kind == "person_address" and value.endswith("NO:7 D:3 PENDİK/İSTANBUL") for kind, value in found(text))


def test_an_institutions_address_is_not_personal() -> None:
    text = "Başvurularınızı Merkez Mah. Atatürk Cad. No:12 Çorlu/Tekirdağ adresine yazılı olarak iletebilirsiniz."
    assert found(text) == []


def test_our_check_digits_agree_with_python_stdnum() -> None:
    # the hot path keeps our checks (stdnum costs 2-48x more per call; see the model card's
    # speed note); stdnum is the oracle
    r = random.Random(33)
    for _ in range(3000):
        digits = str(r.randrange(10**9, 10**11)).zfill(11)
        assert tckn_valid(digits) == tckimlik.is_valid(digits), digits
        assert vkn_valid(digits[:10]) == vkn.is_valid(digits[:10]), digits


def test_a_code_in_the_sentence_after_a_passport_word_is_no_passport() -> None:
    assert found("Pasaport başvurusu için randevu alın. Sipariş numaranız SP20261182.") == []


def test_an_example_domain_before_a_number_is_no_sample_marker() -> None:
    text = "E-posta: emily@example.org Acil durumda +90 547 722 16 77 aranmalı."
    assert {"email", "phone"} <= {k for k, _ in found(text)}


def test_twelve_digits_with_no_phone_key_are_no_phone() -> None:
    assert found("siparis_id=905412278810 tutar=120.00") == []
