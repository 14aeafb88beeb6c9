"""The issue-17 labelled set: every detector kind, the evasive layouts of the structured
identifiers (`pii_layouts`), and hard negatives (invoice and order numbers, 11-digit numbers
failing the checksum in odd layouts, versions, amounts, dates, code that validates IBANs, street
names and public figures in general text, general health and religion questions).

`make_full_corpus(seed, n)` mixes these with the original corpus (`pii_corpus.make_sample`).
"""

from __future__ import annotations

import random

from fairgate.policies.detection.identifiers import vkn_valid
from tests.helpers.pii_corpus import Sample, make_sample, make_tckn, sentences
from tests.helpers.pii_layouts import LAYOUTS, evasive

GIVEN = ["Ahmet", "Mehmet", "Ayşe", "Fatma", "Zeynep", "Mustafa", "Elif", "Emre", "Burak", "Merve",
         "Hüseyin", "Esra", "Can", "Selin", "Murat", "Hatice", "Yusuf", "Derya", "Kemal", "Özlem"]
SURNAME = ["Yılmaz", "Kaya", "Demir", "Şahin", "Çelik", "Yıldız", "Öztürk", "Aydın", "Arslan",
           "Doğan", "Kılıç", "Koç", "Kurt", "Polat", "Korkmaz", "Erdoğan", "Aksoy", "Güneş"]
STREETS = ["Atatürk Cad.", "İstiklal Caddesi", "Gül Sok.", "Bağdat Caddesi", "Cumhuriyet Mah.",
           "Fevzi Çakmak Mahallesi", "Menekşe Sokak", "Kızılay Bulvarı", "Lale Sk.", "Barbaros Blv."]
PLACES = ["Kadıköy/İstanbul", "Çankaya/Ankara", "Konak/İzmir", "Nilüfer/Bursa", "Muratpaşa/Antalya",
          "Seyhan/Adana", "Tepebaşı/Eskişehir", "Ortahisar/Trabzon", "Selçuklu/Konya", "Şişli"]
SPECIAL = {
    "health": ["HIV pozitif", "diyabet hastası", "kanser tedavisi görüyor", "depresyon tanısı aldı",
               "kemoterapi alıyor", "epilepsi hastası"],
    "religion": ["Müslüman", "Hristiyan", "Yahudi", "Alevi", "ateist"],
    "ethnicity": ["Kürt kökenli", "Ermeni asıllı", "Süryani", "Çerkez"],
    "politics": ["X partisi üyesi", "seçimde Y partisine oy verdi", "siyasi görüşü muhafazakar"],
    "union": ["sendika üyesi", "sendikalı bir işçi", "sendikaya üye oldu"],
    "sexual_life": ["eşcinsel", "biseksüel", "cinsel yönelimi farklı"],
    "criminal": ["sabıka kaydı var", "sabıkalı", "hapis cezası aldı", "adli sicil kaydı temiz değil"],
    "biometric": ["parmak izi sisteme kaydedildi", "yüz tanıma verisi alındı", "iris taraması yapıldı"],
    "genetic": ["DNA testi sonucu geldi", "genetik test yaptırdı", "BRCA mutasyonu taşıyor"],
}
ANCHORS = ["Hastamız {n}", "Çalışanımız {n}", "Müşterimiz {n}", "{n}", "Personelimiz {n}"]
EN_SPECIAL = [("health", "I was diagnosed with depression last year."), ("health", "Our patient {n} has HIV."),
              ("religion", "My wife is Jewish and keeps kosher."), ("union", "Our employee {n} is a union member."),
              ("criminal", "{n} has a criminal record from 2015."), ("genetic", "My DNA test came back positive.")]
NEGATIVES = [
    "HIV nasıl bulaşır?", "Diyabet hastaları ne yemeli?", "Kanser tedavisinde yeni yöntemler neler?",
    "İslam'da oruç ne zaman başlar?", "What are the symptoms of diabetes?", "Explain the history of Christianity.",
    "Sendika üyeliği hakkında yasa ne diyor?", "Parmak izi okuyucu nasıl çalışır?", "DNA testi ne kadar sürer?",
    "Depresyonun belirtileri nelerdir?", "Atatürk Caddesi'nde bugün trafik yoğun.", "Bağdat Caddesi alışveriş için güzel.",
    "Mustafa Kemal Atatürk 1881'de Selanik'te doğdu.", "Fatih Sultan Mehmet Köprüsü'nde kaza var.",
    "İstiklal Caddesi tarihi bir yerdir.", "Kadıköy'de yeni bir kafe açıldı.", "Seçim sonuçları yarın açıklanacak.",
    "Python'da IBAN doğrulayan bir fonksiyon yaz: def iban_ok(s): return int(s[4:] + s[:4]) % 97 == 1",
    "Sürüm v2.11.4 ve 3.12.0 yayınlandı.", "Toplam tutar 12.345.678,90 TL oldu.", "Fatura no FTR-2024-00012345.",
    "Sipariş 2024/1234567 kargoda.", "Toplantı 12.03.2024 saat 14:30'da.", "Kargo takip 1Z999AA10123456784.",
    "Yeni plaka yönetmeliği 2025'te yürürlüğe giriyor.", "Pasaport başvurusu için hangi belgeler gerekir?",
    "Vergi numarası nasıl öğrenilir?", "The Jewish holidays this year start in September.",
    "Doğum tarihi alanı zorunlu mu?", "Kürt sorunu üzerine bir makale özetle.",
]


def _name(r: random.Random) -> str:
    return f"{r.choice(GIVEN)} {r.choice(SURNAME)}"


def make_vkn(r: random.Random, valid: bool = True) -> str:
    while True:
        v = "".join(str(r.randint(0, 9)) for _ in range(10))
        if vkn_valid(v) == valid:
            return v


def positive_sentence(r: random.Random, kind: str) -> tuple[str, int, int]:
    """(sentence, label start, label end) for one new-kind positive."""
    if kind == "vkn":
        x = make_vkn(r)
        pre = r.choice(["Vergi no: ", "VKN ", "Şirketin vergi kimlik numarası ", "Tax ID "])
    elif kind == "passport":
        x = r.choice(["U", "S", "Z"]) + "".join(str(r.randint(0, 9)) for _ in range(8))
        pre = r.choice(["Pasaport numarası ", "Passport no: ", "Pasaportu ", "Yolcunun pasaport no "])
    elif kind == "plate":
        x = f"{r.randint(1, 81):02d} {''.join(r.choice('ABCDEFGHJKLMNPRSTUVYZ') for _ in range(r.randint(1, 3)))} {r.randint(10, 9999)}"
        pre = r.choice(["Aracın plakası ", "Plaka: ", "Araç plakası ", "License plate "])
    elif kind == "birth_date":
        x = r.choice([f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(1940, 2010)}",
                      f"{r.randint(1940, 2010)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
                      f"{r.randint(1, 28)} {r.choice(['Mart', 'Ocak', 'Ekim', 'March', 'June'])} {r.randint(1940, 2010)}"])
        pre = r.choice([f"{_name(r)} doğum tarihi: ", "Doğum tarihim ", "Date of birth: ", "Hastanın doğum tarihi "])
    elif kind == "person_address":
        name = _name(r)
        x = f"{name}, {r.choice(STREETS)} No:{r.randint(1, 200)}" + r.choice(["", f" D:{r.randint(1, 40)}", f" Kat {r.randint(1, 9)}"]) \
            + f" {r.choice(PLACES)}"
        pre = r.choice(["Teslimat: ", "Alıcı ", "", "Gönderen: "])
    else:
        return _special(r, kind)
    return pre + x + ".", len(pre), len(pre) + len(x)


def _special(r: random.Random, kind: str) -> tuple[str, int, int]:
    if r.random() < 0.2:
        en = [t for k, t in EN_SPECIAL if k == kind]
        if en:
            s = r.choice(en).replace("{n}", _name(r))
            return s, 0, len(s)
    anchor = r.choice(ANCHORS).replace("{n}", _name(r))
    term = r.choice(SPECIAL[kind])
    s = f"{anchor} {term}."
    return s, 0, len(s) - 1


NEW_KINDS = ("vkn", "passport", "plate", "birth_date", "person_address", *SPECIAL)


def _negative(r: random.Random) -> str:
    x = r.random()
    if x < 0.5:
        return r.choice(NEGATIVES)
    t = make_tckn(r, valid=False)
    odd = [f"{t[:4]} {t[4:8]} {t[8:]}", f"{t[:5]}-{t[5:]}", " ".join(t), f"{t[:3]}\u200e{t[3:6]}\u2063{t[6:]}",
           f"{t[:3]}/{t[3:6]}/{t[6:9]}/{t[9:]}"]
    if x < 0.75:
        return f"Referans {r.choice(odd)} geçersiz."
    if x < 0.85:
        return f"Vergi no {make_vkn(r, valid=False)} hatalı görünüyor."
    if x < 0.92:
        return f"Sipariş numarası {r.randint(10**9, 10**11)} hazırlanıyor."
    return f"Ödeme {r.randint(1, 999)}.{r.randint(100, 999)},{r.randint(10, 99)} TL olarak alındı."


def _labelled(r: random.Random) -> tuple[str, str, int, int]:
    """A sentence with one item of a new kind or an evasive layout: (kind, sentence, start, end)."""
    kind = r.choice([*NEW_KINDS, *LAYOUTS])
    if kind in LAYOUTS:
        value, _layout = evasive(r, kind)
        pre = r.choice(["Bilgi: ", "Kayıt ", "Lütfen kontrol et: ", "Data: "])
        return kind, f"{pre}{value} tamam.", len(pre), len(pre) + len(value)
    return kind, *positive_sentence(r, kind)


def make_kvkk_sample(r: random.Random) -> Sample:
    """1-3 sentences, about half carrying one labelled item of a new kind or evasive layout."""
    text, labels = sentences(r, _labelled, _negative)
    return Sample([text], labels)


def make_split_tckn(r: random.Random) -> Sample:
    """A TCKN split across two messages (user/assistant turns) with words between."""
    t = make_tckn(r)
    cut = r.randint(3, 8)
    a = f"TC numaramın ilk kısmı {t[:cut]}"
    b = f"Kalanı da {t[cut:]} şeklinde."
    start = a.index(t[:cut])
    return Sample([a, b], [("tckn", start, len(a) + 1 + b.index(t[cut:]) + len(t) - cut)])


def make_full_corpus(seed: int, n: int) -> list[Sample]:
    """The original corpus, the new kinds and layouts, and split TCKNs, interleaved."""
    r = random.Random(seed)
    out: list[Sample] = []
    for i in range(n):
        k = i % 5
        out.append(make_sample(r) if k == 0 else make_split_tckn(r) if k == 1 and r.random() < 0.3
                   else make_kvkk_sample(r))
    return out
