"""Findings that are not a natural person's data: an institution's contact points and a legal
person's identifiers. `DetectionOptions` decides whether they still count.

- Phones whose type (Google's `phonenumbers`) is a shared line: 0850 (VoIP/UAN), 444 xx xx
  (UAN), 0800 (toll free), 0900 (premium), shared cost.
- E-mail addresses whose local part is a role mailbox (`kvkk@`, `ik@`, `info@`, `destek@`), or
  has one among its dash/dot/underscore parts (`bt-destek@`) outside the free mail providers.
- VKNs and IBANs written right after a company's trade name or a legal-person column
  (`A.Ş.`, `Ltd. Şti.`, `unvan`, `Satıcı:`, a body speaking of itself: `Vakfımızın`,
  `DAİREMİZİN`) with no person's name in between, or right before "şirket hesabımıza" or
  "dernek hesabına".
- Vehicle plates a company or body owns: its trade name in the plate's aside ("07 ABS 1190
  (Akdeniz Turizm A.Ş. servis aracı)") or "Belediyemize ait" right before it.
- Turkish fixed lines (`0312 418 22 90`) written after an institution's word on their line
  (`Eczanesi`, `santrali`, `Derneği`, `A.Ş.`, a role mailbox like `info@`) with no person's
  name within a few lines: a pharmacy's, an association's or a company's switchboard in a
  notice; or at most 50 characters after such a word with no name between them, even in a
  message to a named person ("Sayın X, ... Eczane Nilüfer, tel 0224 ..."). Of the realistic set's personal phones one in sixty is a fixed line (in a record that
  names its owner), while institutions' fixed lines were most of its phone false alarms. Two or
  more different fixed lines in a text that names nobody are a directory of branches or offices,
  and a fixed line whose line also gives a fax ("TEL: ... - FAKS: ...") is an office's letterhead.
  A fixed line a notice gives for questions ("... kapalıdır. Bilgi: 0462 ...", "... 'ı arayabilirsiniz",
  "... numaralı santrale") with no person's name at either side is the sender's, even in a
  reminder to a named patient; not after "ev telefonum" or "beni".
- Values in a software test's text, whatever the options: a test word within 200 characters
  (`sandbox`, `fixtures`, `seed`, `sahte`, `test kartı`, `gerçek kişi değildir`, a unit test's
  `expect(`, `describe(`, `assert`) or a
  documented sample right after `Örnek:`; a prompt that gives a value without such words
  ("kartım 4111 1111 1111 1111") stays personal.
- Test fixtures, whatever the options: placeholder mailboxes (`test@`, `user@`, `dummy@`) at
  the reserved example domains (RFC 2606: example.com/.org/.net, .test, .example, .invalid,
  localhost) -- `ayse@example.org` may be a real person's address in a sample, so the local
  part decides -- and phone numbers whose last seven digits are one digit repeated
  (0555 000 00 00), and plates whose number is all zeros (34 T 0000).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache

import phonenumbers
import re2
from phonenumbers import PhoneNumberType

from fairgate.policies.detection_options import DetectionOptions

Span = tuple[str, int, int]
_SHARED = frozenset({PhoneNumberType.VOIP, PhoneNumberType.UAN, PhoneNumberType.TOLL_FREE,
                     PhoneNumberType.PREMIUM_RATE, PhoneNumberType.SHARED_COST})
ROLE_MAILBOXES = frozenset(
    "kvkk ik hr info bilgi destek support iletisim contact muhasebe satis sales noreply no-reply "
    "admin webmaster basvuru cagri musteri musterihizmetleri kurumsal sikayet fatura insankaynaklari "
    "kariyer career yardim help beyazmasa halklailiskiler basin press hukuk legal teklif siparis "
    "randevu hasta hastahaklari ogrenci idari ithalat ihracat operasyon postmaster abuse bagis servis "
    "teknikservis tesis rezervasyon reservation booking efatura earsiv yatirimci investor satinalma "
    "purchasing lojistik kargo ihale duyuru haber news editor bilgiislem helpdesk sekreterlik ilbasin "
    "kartmerkezi alarm alert alerts oncall monitoring enstitu dekanlik fakulte rektorluk mudurluk bolum "
    "ogrenciisleri personel isleri dernek vakif sendika kongre tuketici uyelik etkinlik "
    # a service's desk or a programme's office ("ariza@", "bildirim@", "bagaj@", "gonullu@", "erasmus@")
    "ariza bildirim bilgiedinme cimer veri veriyonetimi kisiselveri verisorumlusu uye uyeler bagaj "
    "kayipesya gonullu gonulluluk casting secmeler erasmus mezun mezunlar burs staj kayit odeme "
    "tahsilat abone abonelik".split())
_GLUED_ROLES = ("destek", "iletisim", "basvuru", "randevu", "sikayet")
_KEP_PERSON = ("av.", "av_", "avukat", "dr.", "dr_")  # a professional's own KEP box ("av.ayse.kaya@hs01.kep.tr")
_FREE_MAIL = ("gmail.", "googlemail.", "hotmail.", "outlook.", "live.", "msn.", "yahoo.", "yandex.", "icloud.",
              "me.com", "mail.ru", "proton", "gmx.", "aol.", "windowslive.", "mynet.", "superonline.", "ttmail.")
_LEGAL = re.compile(
    r"(?<!\w)(?:a\.?[sş]\.|ltd\.?|[sş]ti\.?|tic\.|san\.|holding|anonim|limited|[sş]irketi|kooperatifi|"
    r"belediyesi|müdürlüğü|başkanlığı|derneği|vakfı|birliği|unvan\w*|satıcı|tedarikçi\w*|şirketimiz\w*|"
    # a body speaking of itself ("Vakfımızın", "Belediyemizin", "DAİREMİZİN", "dernek hesabımız")
    r"(?:vakf|belediye|daire|derne[kğ]|okul|cami|kul[üu]b|sendika|birli[gğ])\w*m[ıi]z\w*|dernek[ \t]+hesab\w*)(?![\w@.])",
    re.IGNORECASE)
# (or an enforcement office's account a debt is paid into: "... numaralı icra dairesi hesabına")
_LEGAL_AFTER = re.compile(r"[^\n]{0,30}?(?:şirket|firma|kurumsal|dernek|vak[ıi]f|kul[üu]p|sendika|(?:icra[ \t]+|(?<=icra[ \t]))daires[ıi])[ \t]+hesab",
                          re.IGNORECASE)
# (and a Turkish form's stand-in domains: "ornek@alanadi.com", "ad.soyad@sirket.com.tr")
_EXAMPLE_DOMAIN = re.compile(r"@(?:[\w\-]+\.)*(?:example\.(?:com|org|net)|localhost)$|\.(?:test|example|invalid|localhost)$"
                             r"|@(?:alanadi|alanad[ıi]n[ıi]z|ornek|domain|sirket|firma|kurum)\.com(?:\.tr)?$",
                             re.IGNORECASE)
# (and Turkish ones: "ornek@", "kullanici@", "ad.soyad@", "ali.veli@", the "John Doe" of Turkish forms)
_PLACEHOLDERS = frozenset("test user admin demo dummy foo bar example noreply mock sample john.doe jane.doe "
                          "ornek kullanici isim adsoyad ad.soyad ali.veli eposta email mail".split())
# a sole proprietorship ("şahıs şirketi", "şahıs firması") is its owner's: a natural person's VKN and IBAN
_PERSONISH = re.compile(r"(?<!\w)(?:ad[ıi]?[ _]?soyad\w*|(?:şahıs|sahis|şahsi)(?:[ \t]+(?:şirket|sirket|firma|işletme)\w*)?|"
                        r"serbest meslek|bey|hanım)(?!\w)", re.IGNORECASE)


@lru_cache(maxsize=4096)  # (a number is parsed once for both tests and the directory test)
def shared_line(digits: str) -> bool:
    """Whether a phone number is an institution's shared line (0850, 444, 0800, 0900)."""
    try:
        number = phonenumbers.parse(digits, "TR")
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.number_type(number) in _SHARED


@lru_cache(maxsize=4096)
def fixed_line(digits: str) -> bool:
    """Whether a phone number is a Turkish fixed line (an area code, not a mobile)."""
    try:
        number = phonenumbers.parse(digits, "TR")
    except phonenumbers.NumberParseException:
        return False
    return number.country_code == 90 and phonenumbers.number_type(number) == PhoneNumberType.FIXED_LINE


_INSTITUTION = re.compile(
    r"(?<!\w)(?:eczane\w*|santral\w*|klini[kğ]\w*|polikli\w+|muhtarl\w+|derne\w+|vakf\w+|belediye\w*|müdürlü\w+|başkanlı\w+|merkez\w*|"
    r"sekreterli\w+|hatt\w+|acente\w*|emlak|otel\w*|mersis|a\.?[sş]\.|ltd\.?|[sş]ti\.?|"
    # a notice's contact line: "Site Yönetimi: ...", "Otopark İşletmesi: ...", "randevuları için ..."
    # ("Bilgi:" says nothing: a person writes it before their own number too)
    r"yönetim\w*|işletme\w*|randevu\w*|"
    # an office's or a service's line ("AV. BÜROSU – 0312 ...", "7/24 hizmet vermektedir: 0216 ...",
    # "Bilgi: Liman Gayrimenkul 0242 ...")
    r"büro\w*|hizmet\w*|gayrimenkul\w*|"
    # a hotel's or a venue's booking line ("Bilgi ve rezervasyon: 0312 ...")
    r"rezervasyon\w*|"
    # a role mailbox (a person's own address on the line says nothing about the number)
    r"(?<![\w.+\-])(?:" + "|".join(sorted(ROLE_MAILBOXES | {"rezervasyon"})) + r")@[\w.\-]+)(?!\w)",
    re.IGNORECASE)


_FAX = re.compile(r"(?<!\w)(?:faks|fax)(?!\w)", re.IGNORECASE)


def _fax_line(text: str, start: int) -> bool:
    """The number's line also gives a fax ("TEL: 0318 ... - FAKS: 0318 ..."): an office's
    letterhead or contact page; people give no fax."""
    line_end = text.find("\n", start)
    return _FAX.search(text, text.rfind("\n", 0, start) + 1, len(text) if line_end == -1 else line_end) is not None


def _institution_before(text: str, start: int) -> bool:
    """An institution's word earlier on the number's line (at most 120 characters back), or on
    one of the two lines before it within 200 characters: a letterhead's block ("... Müdürlüğü" /
    "Adres: ..." / "Tel: 0312 ...")."""
    line = text.rfind("\n", 0, start)
    lo = max(line + 1, start - 120)
    if _INSTITUTION.search(text, lo, start) is not None:
        return True
    if line == -1:
        return False
    above = text.rfind("\n", 0, max(0, text.rfind("\n", 0, line)))
    return _INSTITUTION.search(text, max(above + 1, start - 200), line) is not None


def _institution_right_before(text: str, start: int, people: list[tuple[int, int]]) -> bool:
    """An institution's word at most 50 characters before the number on its line, with no
    person's name between them ("Eczane Nilüfer, tel 0224 ...", "ŞİFA ECZANESİ 0352 ...",
    "Yenileme için acente: 0 212 ..."): the institution's line even in a message that names
    its addressee."""
    lo = max(text.rfind("\n", 0, start) + 1, start - 50)
    ends = [m.end() for m in _INSTITUTION.finditer(text, lo, start)]
    return bool(ends) and not any(ends[-1] <= s < start for s, _ in people)


# a notice's contact line: "Bilgi: 0462 ..." or "BİLGİ İÇİN: 0252 ..." after the notice's last
# sentence (alone, "Bilgi: 0312 ..." may be anyone's), "0232 ... 'ı arayabilirsiniz", "0312 ...
# NUMARALI SANTRALE"; also after a public service's short number ("Bilgi için Beyaz Masa 153 veya
# 0222 ...", "BİLGİ: ALO 181 ya da 0312 ..."); not a person giving their own ("ev telefonum", "beni")
_NOTICE_BEFORE = re.compile(r"(?:(?<=[.!?] )|(?<=[.!?]\n))bilgi(?:[ \t]+(?:almak[ \t]+)?i[çc]in)?[ \t]*[:\-–]?[ \t]*"
                            r"(?:(?:[^\W\d_]+[ \t]+){0,3}[0-9]{3,4}[ \t]+(?:veya|ya[ \t]+da|/)[ \t]+)?\Z", re.IGNORECASE)
# (or a switchboard's: an extension after it, "0312 585 10 00 dahili 4471", "(dahili 2)", "/ dahili 1600"; "... numaralı hattı
# arayabilir", "... numaralı SGM'yi / şubemizi"; or its office named in an aside, "0324 ... (İl Müdürlüğü)")
_NOTICE_AFTER = re.compile(r"['’]?\w{0,4}[ \t]+(?:arayabilir(?:siniz|ler)?|numaral[ıi][ \t]+(?:santral|hatt(?![ıi]m(?![ıi]z))|sgm|[şs]ube|merkez|birim|m[üu]d[üu]rl|b[üu]ro)|dahili(?!\w))"
                           r"|[ \t]*[(/][ \t]*dahili(?!\w)|[ \t]*\((?=[^()\n]{0,40}?(?<!\w)(?:müdürlü|başkanlı|belediye|merkez|santral|birim)\w*\))",
                           re.IGNORECASE)
_MINE = re.compile(r"(?<!\w)(?:numaram\w*|telefonum\w*|beni|ev[ \t]+telefon\w*|evim\w*)(?!\w)", re.IGNORECASE)


def _notice_line(text: str, start: int, end: int, people: list[tuple[int, int]]) -> bool:
    """A fixed line a notice gives for questions: "Bilgi:" right before it or "arayabilirsiniz"
    / "numaralı santrale" right after it, with no person's name at either side (an appointment
    reminder to a named patient still gives the hospital's line so)."""
    line_lo = text.rfind("\n", 0, start) + 1
    cue = _NOTICE_BEFORE.search(text, max(line_lo, start - 60), start) or _NOTICE_AFTER.match(text, end)
    if cue is None or _MINE.search(text, line_lo, start):
        return False
    lo, hi = min(cue.start(), start), max(cue.end(), end) + 40
    return not any(lo <= s and e <= hi for s, e in people)


def _nobody_near(start: int, end: int, people: list[tuple[int, int]]) -> bool:
    """No person's name or address within 300 characters before or 150 after (a record's lines)."""
    return not any(start - 300 <= e and s <= end + 150 for s, e in people)


def _directory(text: str, found: list[Span], people: list[tuple[int, int]]) -> bool:
    """Two or more different fixed lines and nobody's name or address: a list of branches or
    offices, not a person's numbers."""
    lines = {text[s:e] for kind, s, e in found if kind == "phone" and fixed_line(re.sub(r"[^0-9+]", "", text[s:e]))}
    return len(lines) >= 2 and not people


# an address spelt out ("basvuru [at] izmirtiyatro [nokta] org") read back to its plain form
_SPELT_AT = re.compile(r"[ \t]*[\[\(\{<][ \t]?(?:at|et)[ \t]?[\]\)\}>][ \t]*|[ \t]+(?:at|et)(?:[ \t]+i[şs]areti)?[ \t]+",
                       re.IGNORECASE)
_SPELT_DOT = re.compile(r"[ \t]*[\[\(\{<][ \t]?(?:dot|nokta|punto)[ \t]?[\]\)\}>][ \t]*|[ \t]+(?:dot|nokta|punto)[ \t]+",
                        re.IGNORECASE)


def _plain_address(address: str) -> str:
    """`address` with a spelt "at" and spelt dots as "@" and "." (plain addresses unchanged)."""
    if "@" in address:
        return address
    return _SPELT_DOT.sub(".", _SPELT_AT.sub("@", address, count=1))


def role_mailbox(address: str) -> bool:
    """The local part is a role ("kvkk", "ik", "destek"), whole or as one of its dash-, dot- or
    underscore-joined parts ("bt-destek", "satis.ankara", "ogrenci_isleri"); a person's
    "ayse.destek" is rarer than a team's. A KEP (registered e-mail) box is a firm's or an
    office's, but where a lawyer's or doctor's title opens it."""
    local, _, domain = address.strip().lower().partition("@")
    if local.replace(".", "").replace("_", "") in ROLE_MAILBOXES:
        return True
    if domain.endswith("kep.tr") and not local.startswith(_KEP_PERSON):
        return True  # a registered e-mail (KEP) box: a firm's or an office's, but a lawyer's or doctor's own
    # (at a free mail provider the parts are a person's choice: "deryacakir_muhasebe@hotmail.com")
    if domain.startswith(_FREE_MAIL):
        return False
    # a role after a unit's word, glued ("sosyaldestek@", "ogrencibilgi@"): a desk's, not a person's
    return any(part in ROLE_MAILBOXES or part.endswith(_GLUED_ROLES) for part in re.split(r"[._\-]", local))


def legal_person(text: str, start: int, names: list[tuple[int, int]]) -> bool:
    """A VKN or IBAN at `start` whose nearest owner within 240 characters before it is a
    company (trade name, legal-person column) rather than a person (a name, `ad_soyad`)."""
    lo = max(0, start - 240)  # (a firm's page names the firm, then its site, then its tax number)
    legal = [m.end() for m in _LEGAL.finditer(text, lo, start)]
    if not legal:
        return bool(_LEGAL_AFTER.match(text, _after_value(text, start)))
    person = [m.end() for m in _PERSONISH.finditer(text, lo, start)] + [e for s, e in names if lo <= s < start]
    return not person or max(legal) > max(person)


# a company's or a body's vehicle: its trade name in the plate's aside ("07 ABS 1190 (Akdeniz
# Turizm A.Ş. servis aracı)") or its own word right before ("Belediyemize ait 35 BLD 204")
_COMPANY_ASIDE = re.compile(r"[ \t]*[(,–—][^\n()]{0,40}?(?<!\w)(?:a\.?[sş]\.|ltd\.?|[sş]ti\.?)", re.IGNORECASE)
_BODY_OWNS = re.compile(r"(?<!\w)(?:belediye|kurum|şirket|firma|vakf|derne[kğ])\w*m[ıi]z[ea][ \t]+ait[ \t]+\Z",
                        re.IGNORECASE)


def _company_vehicle(text: str, start: int, end: int, names: list[tuple[int, int]]) -> bool:
    """A plate whose owner the text names as a company or a body, with no person's name between."""
    aside = _COMPANY_ASIDE.match(text, end)
    if aside is not None:
        return not any(end <= s < aside.end() for s, _ in names)
    return _BODY_OWNS.search(text, max(0, start - 40), start) is not None


def _after_value(text: str, start: int) -> int:
    """Where the identifier starting at `start` ends (its digits, letters and spaces)."""
    m = re.compile(r"[A-Za-z0-9 ]{10,34}").match(text, start)
    return m.end() if m else start


def fixture(kind: str, value: str) -> bool:
    """A test fixture rather than anyone's data: an example domain, a 0555 000 00 00 number."""
    if kind == "email":
        local = value.split("@", 1)[0].strip().lower()
        stand_in = local in _PLACEHOLDERS or all(part in _PLACEHOLDERS for part in re.split(r"[._\-]", local))
        return stand_in and bool(_EXAMPLE_DOMAIN.search(value.strip()))  # (also "test.user@", "test_user@")
    if kind == "phone":
        digits = re.sub(r"[^0-9]", "", value)
        return len(digits) >= 10 and len(set(digits[-7:])) == 1
    if kind == "plate":  # "34 T 0000", "06 ABC 000": a plate's shape, not a vehicle
        number = re.search(r"[0-9]+\W*\Z", value)
        return number is not None and set(number.group().rstrip()) <= {"0"}
    return False


# The card networks' published test numbers (Visa, Mastercard, Amex, Discover, JCB sandboxes).
# Written as a quoted literal in code ('luhn("4111111111111111")', an SQL row's '...5554444')
# they are a program's test data; said in a sentence ("kartım 4111 1111 1111 1111") they may
# still stand for a card, and stay personal.
_SANDBOX_CARDS = frozenset(
    "4111111111111111 4242424242424242 4012888888881881 4000056655665556 4000000000000002 "
    "5555555555554444 5105105105105100 5200828282828210 2223003122003222 378282246310005 "
    "371449635398431 6011111111111117 6011000990139424 3530111333300000 3566002020360505".split())


def _sandbox_card_literal(text: str, start: int, end: int) -> bool:
    """A network's test card number quoted as a literal in code."""
    if re.sub(r"[^0-9]", "", text[start:end]) not in _SANDBOX_CARDS:
        return False
    before, after = text[start - 1 : start], text[end : end + 1]
    return before in ("'", '"', "`") and after == before


# a software test's own words: sandbox cards, fixtures, seeds, fakes, "gerçek kişi değildir"
# (RE2: one linear pass whatever the text; RE2 does not fold İ to i, hence the explicit classes)
_I = "[iİıI]"
_TEST_CONTEXT = re2.compile(
    r"(?i)(?:^|[^\pL\pN])(sandbox|f" + _I + r"xtures?|dummy|sahte|stag" + _I + r"ng|uat|mock\pL*|seed|placeholder|"
    # a QA or trial account's identifier ("qa_deneme_01", "deneme_kullanici", "deneme_uye_2",
    # "qa-user-3"); not any "deneme_" field: an HR record's "deneme_suresi" (a probation period) is
    # real; nor a ticket's key ("QA-1482: müşteri ... giriş yapamıyor" holds a real customer's data)
    r"(?:qa[_-]|deneme_)(?:kullan|hesa[bp]|[uü]ye|user|account|m[uü][sş]ter|deneme|test|[0-9]+[_-]?[^\W\d_])\w*|"
    r"deneme_[0-9]+\b|"
    r"fake|demo\pL*|test[ _](?:kart|ortam|ver" + _I + r"|numara|" + _I + r"ban|tckn|card|m[üuÜU][şsŞS]ter" + _I
    + r"|kullan[ıiIİ]c)\pL*|un" + _I + r"t[ _]?test\pL*|b" + _I + r"r" + _I + r"m[ _]test\pL*|"
    # the test after its object ("Kart testi için 4111 ..."), a unit test's own code ("func TestMaskPAN(t *testing.T)")
    r"(?:kart|card|" + _I + r"ban|tckn)[ _]test\pL*|test" + _I + r"ng\.T|func[ ]Test\pL*|def[ ]test_\w*|@Test|"
    r"ger[çcÇC]ek[ \t]+(?:b" + _I + r"r[ \t]+)?(?:k" + _I + r"[şsŞS]" + _I + r"|hesa)\pL*[ \t]+(?:a" + _I
    + r"t[ \t]+)?de[ğgĞG]" + _I + r"l)(?:[^\pL\pN]|$)")
# a documented sample ("Örnek: TR33 0006 ...", "örnek olarak 10000000146"), not for e-mails: "ali@ornek.com"
_SAMPLE_BEFORE = re.compile(r"(?<![\w@.])(?:örne[kğ]\w*|ornek\w*|example|e\.g\.)(?![\w@]|\.\w)[^\n0-9@]{0,20}\Z",
                            re.IGNORECASE)


_TESTED = ("tckn", "card", "iban", "email", "phone", "passport")


# each test word holds one of these; in a short text a substring check per hint costs less than
# a call into RE2, in a long one more (0.6 ms against 0.14 ms per 64 KB)
_TEST_HINTS = ("sandbox", "fixture", "dummy", "sahte", "stag", "uat", "mock", "seed", "placeholder", "fake", "demo",
               "test", "gerçek", "gercek", "assert", "expect(", "describe(", "qa_", "qa-", "deneme_")
# a unit test's calls ("expect(maskEmail('ahmet@...'))", "assert gecerli_mi('U00000000')"): code, not a prompt
_CALL_HINTS = ("expect", "describe", "assert")  # (substring checks: a Python regex over 64 KB costs ~1 ms)
_TEST_CALLS = re.compile(r"(?<![\w.])(?:describe|expect|assert\w*)[ \t]*\(|(?<![\w.])assert[ \t]+(?:not[ \t]+)?\w+\(")


def test_words(text: str) -> list[int]:
    """Where a software test's words stand in `text` (their starts, sorted): one RE2 pass over
    the bytes (~2 µs per KB); the rare match's byte offset is turned into a character offset."""
    if len(text) < 4096:
        low = text.lower()
        if not any(hint in low for hint in _TEST_HINTS):
            return []
    data = text.encode("utf-8", "surrogatepass")
    words = [len(data[: m.start(1)].decode("utf-8", "surrogatepass")) for m in _TEST_CONTEXT.finditer(data)]
    calls = [m.start() for m in _TEST_CALLS.finditer(text)] if any(h in text for h in _CALL_HINTS) else []
    return sorted(words + calls) if calls else words


def test_value(text: str, kind: str, start: int, end: int, words: list[int] | None = None) -> bool:
    """A value in a software test's text: a sandbox card, a fixture's TCKN or IBAN, a seed's
    e-mail (a test word within 200 characters: `words`, from `test_words`), or a documented
    sample right after "Örnek:"."""
    if kind not in _TESTED:
        return False
    words = test_words(text) if words is None else words
    k = bisect_left(words, start - 200)
    if k < len(words) and words[k] <= end + 200:
        return True
    return kind != "email" and _SAMPLE_BEFORE.search(text[max(0, start - 40) : start]) is not None


def drop_non_personal(text: str, found: list[Span], options: DetectionOptions) -> list[Span]:
    """`found` without the institutional and legal-person findings `options` exclude (person
    names among `found` decide who owns a VKN or IBAN)."""
    names = [(s, e) for kind, s, e in found if kind == "person_name"]
    people = [(s, e) for kind, s, e in found if kind in ("person_name", "person_address")]
    out: list[Span] = []
    words = test_words(text) if any(kind in _TESTED for kind, _, _ in found) else []
    directory: bool | None = None  # read once, and only for a fixed line that nothing else settles
    for kind, s, e in found:
        if fixture(kind, text[s:e]) or test_value(text, kind, s, e, words) \
                or kind == "card" and _sandbox_card_literal(text, s, e):
            continue
        if not options.institutional_contacts:
            digits = re.sub(r"[^0-9+]", "", text[s:e]) if kind == "phone" else ""
            if digits and shared_line(digits):
                continue
            if digits and fixed_line(digits):
                if _institution_right_before(text, s, people) or _notice_line(text, s, e, people) \
                        or _fax_line(text, s):
                    continue
                if _nobody_near(s, e, people):
                    if _institution_before(text, s):
                        continue
                    directory = _directory(text, found, people) if directory is None else directory
                    if directory:
                        continue
            if kind == "email" and "@" in (plain := _plain_address(text[s:e])) and role_mailbox(plain):
                continue
        if not options.legal_person_data and (kind in ("vkn", "iban") and legal_person(text, s, names)
                                              or kind == "plate" and _company_vehicle(text, s, e, names)):
            continue
        out.append((kind, s, e))
    return out
