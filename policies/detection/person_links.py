"""Whether a piece of text is about a particular person: the test a KVKK special-category term
must pass to be personal data ("HIV nasıl bulaşır?" is a general question; "hastamız HIV
pozitif" is not).

A term is tied to a person when, in its sentence, there is a person's name, a role or relation
("hastamız", "eşim", "kızınız", "şube müdürümüz", "adam"/"kadın"), a role at a place ("3. kattaki
muhasebe şefi"),
a third person's "olduğu(nu)", or the first person ("diyabetim", "yaşıyorum", "birlikte olduk");
or a name stands in the same record (a form's "Hasta: ..." line three lines up, or earlier on
the same line when the term is a form's field: "Sigortalı: X ... Tanı: bel fıtığı"). A general
word ("herkes", "bazı") unties the sentence, but not a clause of it that itself names someone
("... ekibindeyim; herkesi bekleriz").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from fairgate.policies.detection.addresses import person_name_spans
from fairgate.policies.detection.gazetteer import fold_key

_WORDS_FILE = Path(__file__).with_name("data") / "person_words.txt"
# our X ("şube müdürümüz", "veznedarımız"), not our institution or thing ("hastanemiz", "ürünümüz")
# (the ending looked for first: the words excluded are tried only on a word that has it)
_INSTITUTIONS = "|".join((
    "hastane", "şirket", "kurum", "banka", "mağaza", "site", "sistem", "hizmet", "ürün", "ülke", "şehr", "okul",
    "klini", "servis", "birim", "merkez", "poliklini", "firma", "şube", "belediye", "işyer", "fabrika", "otel",
    "restoran", "uygulama", "platform", "program", "proje", "kampanya", "ofis", "bina", "tesis", "laboratuvar",
    "eczane", "müdürlü", "müftülü", "fakülte", "üniversite", "bölüm", "departman", "marka", "kanal", "sayfa", "web",
    "derneğ", "vakf", "ekib", "toplum", "millet", "halk", "dünya", "sektör", "bölge", "il", "ilçe",
    # a shop's goods ("koleksiyonumuzda", "modellerimiz", "çeşitlerimiz")
    "koleksiyon", "model", "çeşit", "stok", "sezon",
    # a union, party, club, congregation or place of worship speaking of itself ("Sendikamız ... talep
    # ediyor", "Sinagogumuz grup ziyaretlerine açıktır", "Manastırımızda ayin")
    "sendika", "parti", "kulüb", "kulub", "cemevi", "cemaat", "kilise", "cami", "loca", "sinagog", "havra", "manast", "dergah",
    "tekke"))
_OURS = rf"(?=\w{{3,}}(?:[ıi]m[ıi]z|[uü]m[uü]z))(?!(?:{_INSTITUTIONS})\w*)(?!\w+l[ae]r[ıi]m[ıi]z)\w{{3,}}(?:[ıi]m[ıi]z|[uü]m[uü]z)\w{{0,4}}"
# a term's last word that is our institution ("Kardiyoloji polikliniğimiz", "Onkoloji servisimizde"):
# the institution speaking, not "my" (its names of four letters or more: "il" begins "ilacımız")
_OUR_INSTITUTION = re.compile("(?:{})\\w*m[ıiuü]z\\w*".format("|".join(i for i in _INSTITUTIONS.split("|") if len(i) >= 4)),
                              re.IGNORECASE)
# our X, a role with a place ("kattaki", "şubesinin"), a form's patient line, a first-person verb
_PATTERNS = re.compile("(?<!\\w)(?:" + "|".join((
    _OURS, r"hasta[ \t]*:",
    # "our" one said with "bizim" ("bizim kız", "BİZİM DAMAT", "bizim müdür"): the family's or the office's
    r"bizim[ \t]+(?:k[ıi]z|o[ğg]lan|damat|gelin|[çc]ocuk|eleman|hoca|m[üu]d[üu]r|[şs]ef|patron|usta)\w*", r"hasta[ \t]+[0-9]{1,3}[ \t]*(?:yaş\w*|y)",  # a clinical note's "Hasta 34 yaşında"
    # "X, 71 yaşında, ...": someone's age in apposition (not "yaşındaki çocuklar", not a
    # biography's "56 yaşında geçirdiği kalp krizi")
    r"(?<=,)[ \t]*[0-9]{1,3}[ \t]+yaşında(?=[ \t]*,)",
    # someone's birth year and place ("1951 Kırşehir doğumlu, bastonla yürüyor")
    r"(?:19|20)[0-9]{2}[ \t]+(?:[^\W\d_]+[ \t]+)?do[ğg]umlu",
    # (not a loanword's "-tik": "kistik", "genetik", "kritik", "otomatik"; "-yom" is the spoken "-yorum")
    # (and "üyesiyim", "gönüllüyüm", "hastayım": a noun with the first person's "-(y)Im", not "giyim")
    # (a locative's "-deyim" too: "ekibindeyim", "evdeyim"; the words "deyim", "giyim" alone are none)
    # (the buffer "y" stands after a vowel only: "sodyum", "Lityum" are no one)
    # a negative aorist's first person ("et yemeyiz", "içmeyim"); not the positive one, whose
    # "-ırım" nouns share ("indirim", "onarım") and a firm's "we" speaks ("öneririz", "bekleriz")
    # (a word that ends in m, k or z first: the endings' backtracking is tried only on those; 3x in all)
    r"(?=\w*[mkz](?!\w))\w+(?:[ıiuü]yorum|[ıiuü]yoruz|[ıiuü]yom|d[ıiuü]m|t[ıiuü]m|d[ıiuü]k|t[ıiuü]k|m[ıi]ş[ıi]m|ac[ae]ğ[ıi]m|"
    # (nor a Latin element's "-iyum": "kalsiyum", "kadmiyum"; after "i" the first person is "-yim")
    r"[aeıioöuü]y[ıiuü]m(?<!(?<!\w)giyim)(?<!(?<!\w)deyim)(?<!kıyım)(?<!koyum)(?<!iyum)|(?<=\w\w)m[ae]y[ıi][mz])"
    r"(?<!istik)(?<!etik)(?<!itik)(?<!atik)(?<!otik)(?<!sandık)(?<!fındık)(?<!yastık)"  # nor a noun's "-dık", "-tim"
    r"(?<!hatim)(?<!eğitim)(?<!öğretim)(?<!üretim)(?<!yönetim)(?<!denetim)(?<!iletim)(?<!işletim)",
)) + ")(?!\\w)", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]+")
# a role at a place ("3. kattaki hukuk müşaviri", "Karşıyaka şubesindeki veznedar"): the place
# word, then within three words a role or relation word or an agent noun (-cı, -ci: "kasiyer",
# "bankacı"); "İçimizdeki Şeytan", "güneybatısındaki bölge" are no one
_AT_PLACE = re.compile(r"(?<!\w)\w+(?:daki|deki|taki|teki)((?:[ \t]+[^\W\d_]+){1,3})", re.IGNORECASE)
_WIDE_PLACES = ("ulkede", "dunyada", "turkiyede", "avrupada", "sehirde", "kentte")
_AGENT = re.compile(r"\w+[cç][ıiuü](?:s[ıiuü]|n[ıi]n|y[ae]|[ıiuü]m[ıi]z)?$", re.IGNORECASE)
_NOT_ONE = re.compile(r"l[iu][kg]|l[ae]r(?![iu]m)")  # after a folded stem: "-lik", a plural alone
# "ablamlar", "annemlere": a first-person relative's plural is that relative and their family
_MY_FOLKS = re.compile(r"ml[ae]r")
# (not a conditional "you": "şeker hastasıysanız", "kullanıyorsanız" is advice to anyone)
# the one addressed, in a reported or ongoing state ("ilçe yönetimine seçilmişsin", "diyete başlamışsın");
# (not an imperative's third person, "üye olsun", nor a conditional's "-sen")
_SUFFIX_2P = re.compile(r"['’]?\w{0,8}?(?:[ \t]+\w{2,12}?)?(?:m[ıiuü][şs]s[ıiuü]n|yors[uü]n)(?!\w)", re.IGNORECASE)
# a body part of mine right before the term ("dizimde kıkırdak hasarı", "belimde fıtık", "midemde ülser")
_MY_BODY_BEFORE = re.compile(
    r"(?<!\w)(?:diz|bel|boyn|omz|sırt|s[ıi]rt|bacağ|bacag|kol|ayağ|ayag|göz|goz|kulağ|kulag|burn|boğaz|bogaz|mide|"
    r"karn|göğs|gogs|kalb|ciğer|ciger|böbreğ|bobreg|baş|bas|kalça|kalca|bileğ|bileg|parmağ|parmag|diş|dis|cild)"
    r"[ıiuü]?m(?:de|da|den|dan)?[ \t]+(?:[^\W\d_]+[ \t]+)?\Z", re.IGNORECASE)
# (not a leaflet's negative imperative: "metformin almayınız", "kullanmayınız"; nor "-sız", without:
# "hastalığından habersiz")
_SUFFIX_1P = re.compile(r"['’]?\w{0,8}?(?:[ \t]+\w{2,12}?)?(?:y?[ıiuü]m|y?[ıiuü]z)(?!\w)(?<!s[ae]n[ıi]z)(?<!m[ae]y[ıi]n[ıi]z)(?<!s[ıiuü]z)"  # diyabetim
                        # a vowel's "my", in any case: "sabıkam", "protezim", "soy testimin", "alerjime"
                        r"|(?<=[aeıioöuü])m(?:[ıiuü]n|[ıiuü]|[ae]|d[ae]n?)?(?!\w)"
                        # and a consonant's, with a case ending, right at the term's end ("DNA testimin sonucu")
                        r"|(?<=[^\W\daeıioöuüAEIİOÖUÜ])[ıiuü]m(?:[ıiuü]n|[ıiuü]|[ae]|d[ae]n?)(?!\w)", re.IGNORECASE)
# nouns made from verbs with -(I)m, which only look like "my ..." ("DNA onarım mekanizmaları",
# "tesettür giyim", "insülin kullanım kılavuzu", "genetik tanım"), folded
_NOT_MINE = frozenset((
    "onarim", "yapim", "secim", "olcum", "cozum", "yorum", "durum", "bakim", "alim", "satim", "yatirim", "kurum",
    "konum", "uretim", "tuketim", "iletim", "egitim", "ogretim", "yonetim", "denetim", "dagitim", "kullanim",
    "tanim", "anlatim", "yazim", "sayim", "kurulum", "giyim", "deyim", "kiyim", "donusum", "gelisim", "degisim",
    "birikim", "iletisim", "yerlesim", "basim", "ekim", "dikim", "bicim", "tutum", "akim", "girisim", "kesim",
    # words that end in "-Iz" with no "we" in them ("kurban kestirmek caiz mi", "deniz", "temiz")
    "caiz", "deniz", "temiz", "ceviz", "domuz", "yildiz", "gunduz", "yalniz", "okuz", "karpuz",
    # Latin loanwords in "-um", elements and measures of a drug's or a lab's text ("Levotiroksin sodyum
    # tabletleri sabah aç karnına alınmalıdır", "serum demir düzeyi")
    "sodyum", "kalsiyum", "potasyum", "magnezyum", "lityum", "baryum", "selenyum", "titanyum", "aluminyum",
    "kromiyum", "serum", "minimum", "maksimum", "optimum", "medium", "forum", "vakum", "spektrum", "premium"))
# a union, association, party or club with "our" speaks for itself ("Sendikamız ... açıkladı")
_OUR_BODY = re.compile(r"(?:sendika|derne[kğg]|parti|kul[üu]b|vakf)[ıiuü]?m[ıiuü]z", re.IGNORECASE)
# a body's own word, then "our ..." ("dernek hesaplarımız"): the body speaking, not the first person
_OUR = re.compile(r"m[ıiuü]z\Z", re.IGNORECASE)  # "our" ("hesaplarımız"), not "we are" ("sendikalıyız")
_BODY_WORD = re.compile(r"(?:sendika|derne[kğg]|parti|kul[üu]b|vakf)", re.IGNORECASE)
_EN_1P = re.compile(r"(?<!\w)(?:I am|I'm|I have|I've been|I was|my|diagnosed)(?:[ \t]+[\w'-]+){0,2}[ \t]*\Z",
                    re.IGNORECASE)
# a general statement: people in general, a conditional, a rule, a possibility, a definition
_GENERIC = re.compile(
    # ("herkes", "herkesin": everyone as the subject; not "herkese söylemiş", "herkesin önünde": told
    # to or done before everyone)
    r"(?<!\w)(?:herkes(?:in(?![ \t]+(?:önünde|içinde|yanında)))?|hiçbir|genellikle|çoğunlukla|bazı|kişiler\w*|hastalar\w*|insanlar\w*|bireyler\w*|"
    # (an aorist's conditional needs a verb stem of two letters or more: "giderse", not "derse", a lesson's dative)
    r"\w{2,}(?:[ıiuü]rsa|[ıiuü]rse|[ae]rsa|[ae]rse)|\w+(?:yorsa|varsa|yoksa|malıdır|melidir|malı|meli)|"
    # a possibility, but not a request ("erteleyebilir miyim", "gelebilir misiniz")
    r"\w+(?:abilir|ebilir)(?![ \t]+m[ıi](?:y[ıi]m|s[ıi]n|y[ıi]z))|"
    r"gerekir|nedir|nelerdir|yasakt[ıi]r|"  # (and a rule: "sürücünün ... kullanması yasaktır")
    # counts and statistics about groups ("sendikalı işçi sayısı", "hükümlülerin büyük bölümü")
    r"istatisti\w*|bilanço\w*|şüpheliler\w*|hükümlüler\w*|tutuklular\w*|sürücüler\w*|bunları\w*|"
    r"yakınları\w*|dikkatine|[0-9]+(?:[,.][0-9]+)?[ \t]+(?:bin|milyon)\w{0,3}|say[ıi]s[ıi]|say[ıi]lar[ıi]|"
    # a count of people in news ("14 şüpheli gözaltına alındı", "yüzlerce sanık", "40 işçi")
    r"(?:[0-9]+|onlarca|yüzlerce|binlerce)[ \t]+(?:şüpheli|sanık|zanlı|hükümlü|tutuklu|işçi|kişi)\w*|"
    r"işçiler\w*|çalışanlar\w*|vatandaşlar\w*|sendikalar\w*|mahkumlar\w*)(?!\w)", re.IGNORECASE)
# a question about my own case, a request ("erteleyebilir miyim?", "alabilir misiniz?"): not a topic's
_MY_REQUEST = re.compile(r"(?<!\w)m[ıi](?:y[ıi]m|y[ıi]z|s[ıi]n[ıi]z)(?!\w)", re.IGNORECASE)
# someone's "that he/she is" within three words after the term (not a cause's: "diyabetin en sık
# iki neden olduğunu" is five words on)
_IS_ONE = re.compile(r"\w*['’]?\w*(?:[ \t]+[\w'’]+){0,2}?[ \t]+(?:olduğu|olduğunu|olduğundan|olmadığını|olduğumu)(?!\w)",
                     re.IGNORECASE)
# a sentence ends at a stop, but not at a title's abbreviation before a name ("yeni dönem başkanı
# Dt. Nazende ...", "yönetim kurulu üyesi Av. Gökçe ...", "SEÇİLEN DR. AYKUT ...")
# (the stop first, the abbreviations looked behind it: a pattern that starts with a look-behind
# is tried at every position, one that starts with a character class only at those characters: 7x)
_TITLE_STOP = (r"(?<!(?<!\w)(?i:dr|dt|av|op|sn|hz)\.)(?<!(?<!\w)(?i:do[çc]|uzm|ecz|m[üu]h|mim|yrd|[öo][ğg]r|g[öo]r|"
               r"ar[şs]|vet)\.)(?<!(?<!\w)(?i:prof|do[çc]t)\.)")
_SENTENCE_END = re.compile(r"(?:[!?\n]|\." + _TITLE_STOP + r")(?:[ \t]|\Z)")
# a relative in the first person ("eşim", "kayınvalidemin", "annemle"), also typed without
# Turkish letters ("esim", "kardesim", "oglumun"): a particular person
_RELATIVES = ("eşim", "karım", "kocam", "nişanlım", "sevgilim", "annem", "babam", "anneannem", "babaannem", "oğlum",
              "kızım", "kardeşim", "ablam", "abim", "ağabeyim", "amcam", "dayım", "halam", "teyzem", "yeğenim",
              "kuzenim", "dedem", "ninem", "torunum", "kayınvalidem", "kayınpederim", "kayınbiraderim", "baldızım",
              "görümcem", "eltim", "bacanağım", "eniştem", "yengem", "gelinim", "damadım", "çocuğum", "bebeğim",
              "komşum", "arkadaşım")
_ASCII_OF = {"ş": "[şsŞS]", "ı": "[ıiIİ]", "i": "[iıİI]", "ğ": "[ğgĞG]", "ü": "[üuÜU]", "ö": "[öoÖO]", "ç": "[çcÇC]"}
_MY_RELATION = re.compile(
    r"(?<!\w)(?:" + "|".join("".join(_ASCII_OF.get(c, c) for c in w) for w in _RELATIVES) + ")"
    r"(?:[ıiuü]n|[ıiuü]|[ae]|l[ae]|d[ae]n?|[ıiuü]z)?(?!\w)", re.IGNORECASE)


def my_relation(word: str) -> bool:
    """One word is a first person's relative, with a case ending maybe ("Eşimle", "ANNEMİN", "kizimla"):
    never a name, though a sentence's first word is capitalised."""
    return _MY_RELATION.fullmatch(word) is not None


# a sentence about a topic: an English one ("The Jewish holidays ...", "Explain the history of
# ...") or an instruction ("Kürt sorunu üzerine bir makale özetle")
_TOPIC = re.compile(r"(?<!\w)(?:the|what|how|explain|describe|history|özetle|açıkla|anlat|listele|makale\w*)(?!\w)",
                    re.IGNORECASE)


@lru_cache(maxsize=1)
def _person_words() -> tuple[frozenset[str], frozenset[str], tuple[int, ...], dict[str, tuple[str, ...]]]:
    """Folded, from `data/person_words.txt`: whole words, one-word stems, the stems' lengths,
    and two-word stems by their first word ("ev" -> "ev arkadaşım", "ev sahibim")."""
    whole: set[str] = set()
    stems: set[str] = set()
    pairs: set[str] = set()
    for line in _WORDS_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            key = fold_key(line.removesuffix("$"))
            (whole if line.endswith("$") else pairs if " " in key else stems).add(key)
    by_first: dict[str, tuple[str, ...]] = {}
    for p in sorted(pairs):
        by_first[p.split(" ", 1)[0]] = (*by_first.get(p.split(" ", 1)[0], ()), p)
    return frozenset(whole), frozenset(stems), tuple(sorted({len(s) for s in stems})), by_first


def _person_word(text: str, lo: int, hi: int) -> bool:
    """A relation or role word in text[lo:hi] (`data/person_words.txt`): a whole word, or a stem
    with any suffix but a plural alone or an institution's "-lik" ("müdürlüğü", "hastalar")."""
    pairs = _person_words()[3]
    words = _WORD.findall(fold_key(text[lo:hi]))
    for k, w in enumerate(words):
        if person_word(w):
            return True
        if w in pairs and k + 1 < len(words):
            pair = f"{w} {words[k + 1]}"
            if any(pair.startswith(p) for p in pairs[w]):
                return True
    return False


@lru_cache(maxsize=1 << 14)
def person_word(key: str) -> bool:
    """One folded word is a relation or role word of `data/person_words.txt` ("kızım",
    "müdürümüz", "stajyer")."""
    whole, stems, sizes, _ = _person_words()
    return key in whole or any(key[:n] in stems and (not _NOT_ONE.match(key, n) or _MY_FOLKS.match(key, n - 1))
                               for n in sizes if n <= len(key))


def tied_to_person(text: str, start: int, end: int, names: Sequence[tuple[int, int]]) -> bool:
    """Whether the term at text[start:end] is about a person (see the module's docstring);
    `names`: person names found in the text."""
    first = _SUFFIX_1P.match(text, end) or _SUFFIX_2P.match(text, end)
    # the word the suffix ends (the term's own last word when it is glued on: "Kurban kes" + "im")
    # (a noun in "-Im" with a case ending, "Kurban kesimi": the noun's own "-Im", not "my")
    if first is not None and (_not_mine(fold_key(word := (text[start:end] + first.group()).split()[-1]))
                              or _OUR_INSTITUTION.fullmatch(word)):
        first = None
    # "Sendikamız", "dernek hesaplarımız": an association, union or party speaking for itself
    body = _OUR_BODY.match(text, start) is not None or (
        first is not None and _BODY_WORD.match(text, start) is not None and _OUR.search(first.group()) is not None)
    if first and not body or _MY_BODY_BEFORE.search(text, max(0, start - 30), start):
        return True  # "şeker hastasıyım"; "dizimde kıkırdak hasarı var": my body's
    lo, hi = sentence(text, start, end)
    if _named_nearby(text, start, end, (lo, hi), names) or _missing_notice(text, start, end, names):
        return True
    if _EN_1P.search(text, max(lo, start - 40), start):
        return True
    if person_name_spans(text, lo, hi):
        return True
    # "sendikaya üye olduğunu", "Zaza olduğunu": the term said of someone
    relation = _person_word(text, lo, hi) or _IS_ONE.match(text, end) is not None
    if relation and _MY_RELATION.search(text, lo, hi):
        return True  # "kayınvalidem ..., biri sorarsa ...": my relative, whatever else the sentence says
    if not body and _clause_says_of_someone(text, start, end, lo, hi):
        return True
    return (relation or (not body and bool(_PATTERNS.search(text, lo, hi)))
            or _role_at_place(text, lo, hi)) and not _GENERIC.search(text, lo, hi)


def _not_mine(key: str) -> bool:
    """A word in `_NOT_MINE`, or one with up to three letters of a case ending after it."""
    return any(key[:n] in _NOT_MINE for n in range(max(3, len(key) - 3), len(key) + 1))


def generic(text: str, lo: int, hi: int) -> bool:
    """text[lo:hi] says something general ("herkes", "hastalar", "-malıdır", "nedir")."""
    return _GENERIC.search(text, lo, hi) is not None


# a clause ends at a stop's kin or at a conjunction that begins another ("üye oldum ama müdür
# öğrenirse ..."; not a decimal comma: "0,6-1,2 mEq/L")
# (the space before the conjunction matched, not looked behind: a pattern that starts with a
# look-behind is tried at every position)
# (and "diye", which closes what is said or the reason: "peçeli geliyor diye bazı veliler ...")
_CLAUSE_BREAK = re.compile(r"[;:]|,(?![0-9])|[ \t](?i:ama|fakat|ancak|çünkü|lakin|diye)(?!\w)")
# someone new somewhere ("sınıfa yeni gelen çocuk", "yeni başlayan stajyer"), in the term's own
# clause only ("Yeni gelen öğretmen kadrosu, engelli öğrencilerle ..." is a staff, and not the term's)
# (one who moved in is new without the word: "Karşı daireye taşınan Yahudi aile")
# (or a new one in a post: "okulun yeni temizlik görevlisi", "yeni hemşire")
_NEWCOMER = re.compile(r"(?<!\w)(?:yeni[ \t]+(?:gelen|başlayan|katılan)|(?:yeni[ \t]+)?taşınan)[ \t]+"
                       r"(?![^\W\d_]*?l[ae]r)[^\W\d_]{3,}|(?<!\w)yeni[ \t]+(?:[^\W\d_]+[ \t]+)?(?:görevlisi|"
                       r"eleman|çalışan|komşu|öğretmen|hemşire|stajyer|personel|kapıcı|sekreter)(?![^\W\d_]*l[ae]r)",
                       re.IGNORECASE)


def _clause_says_of_someone(text: str, start: int, end: int, lo: int, hi: int) -> bool:
    """The term's own clause (between commas, semicolons or colons of its sentence `lo`..`hi`)
    has a first person's verb or a particular person ("halk dansları ekibindeyim", "yeni gelen
    çocuk kipa takıyo", "resepsiyondaki çocuk takkeyle çalışıyor") and no general word: a
    general word in another clause ("herkesi bekleriz", "herkes baktı ona") speaks of others,
    not of the term."""
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(text, lo, hi)]
    c_lo = max([b + 1 for b in breaks if b < start], default=lo)
    c_hi = min([b for b in breaks if b >= end], default=hi)
    someone = bool(_PATTERNS.search(text, c_lo, c_hi) or _NEWCOMER.search(text, c_lo, c_hi)) \
        or _role_at_place(text, c_lo, c_hi)
    return someone and not _GENERIC.search(text, c_lo, c_hi)


# someone described by where they are ("resepsiyondaki yeni çocuk", "kasadaki kız", "karşı
# masadaki adamla"), folded, with a case ending but no plural
# and a trade or office by its place ("Karşı dairedeki emekli öğretmen", "camisindeki imam efendi")
_SOMEONE = re.compile(r"(?:cocu[kg]|kiz|kadin|adam|genc|oglan|delikanli|hanim|bey|teyze|amca|abla|abi|aile|cift|"
                      r"ogretmen|imam|efendi|emekli|doktor|hemsire|avukat|polis|uzman|bakkal|kasap|berber|terzi|esnaf)"
                      r"(?:y?[aeiu]|[iu]n|y?l[ae]|d[ae]n?|[iu]n[iu]n)?")


_PLURAL_HEAD = re.compile(r"l[ae]r[iı]")  # a plural compound's head ("çocukları", "maaşlarını")


def _role_at_place(text: str, lo: int, hi: int) -> bool:
    for m in _AT_PLACE.finditer(text, lo, hi):
        if fold_key(m.group()).startswith(_WIDE_PLACES):
            continue  # a country's or a city's people ("Ülkedeki Suriyeli sığınmacı sayısı"), no one's
        # a plural in the place, the word or a compound's head after it ("bölgelerdeki kız", "okuldaki
        # kız çocukları"; not a later "yıllardır": "kattaki emekli öğretmen yıllardır ...")
        place_many = any(p in fold_key(text[m.start() : m.start(1)]) for p in ("lar", "ler"))
        words = m.group(1).split()
        for k, word in enumerate(words):
            key = fold_key(word)
            head = fold_key(words[k + 1]) if k + 1 < len(words) else ""
            many = place_many or "lar" in key or "ler" in key or _PLURAL_HEAD.search(head) is not None
            if person_word(key) or _AGENT.match(word) or (not many and _SOMEONE.fullmatch(key)):
                return True
    return False


def _named_nearby(text: str, start: int, end: int, sent: tuple[int, int], names: Sequence[tuple[int, int]]) -> bool:
    lo, hi = sent
    line_lo, line_hi = text.rfind("\n", 0, start) + 1, _line_end(text, end)
    rec_lo, rec_hi = _record(text, start, end)
    # "Tedavi talebi: ..., tanı bel fıtığı" in a one-line form (a question is general)
    form_field = ":" in text[lo:start] and text[hi - 1 : hi] != "?"
    before = [e for s, e in names if line_lo <= s and e <= lo and start - s <= 200]
    for s, e in names:
        if s < hi and lo < e:
            return True  # (or across the edge of the sentence's 100-character window: no stop between)
        if rec_lo <= s and e <= rec_hi and not line_lo <= s < line_hi:
            return True  # another line of the same record
    if before and form_field:
        return True  # an earlier sentence of the same one-line form
    # or one of the two sentences before, where this one is no question or general statement
    return any(_previous_sentence(text, e, lo) for e in before) and not _question_or_general(text, lo, hi)


# a missing person's notice ("KAYIP!", "KAYIP ARANIYOR", "Gören olursa ...", "Gören 0538 ...", "haber alınamıyor")
_MISSING = re.compile(r"(?<!\w)(?:kay[ıi]p[ \t]*(?:!|aran[ıi]yor|ilan)|aran[ıi]yor[ \t]*!|g[öo]ren(?:ler)?[ \t]+"
                      r"(?:olursa|varsa|l[üu]tfen|[0-9+(])|haber[ \t]+al[ıi]nam[ıi]yor)", re.IGNORECASE)


def _missing_notice(text: str, start: int, end: int, names: Sequence[tuple[int, int]]) -> bool:
    """A missing person's notice names the person once and then describes them, sentence after
    sentence without a subject ("Alzheimer hastası ... Üzerinde kahverengi yelek, başında beyaz
    takke var"): a name in the term's paragraph (600 characters either side) ties it."""
    lo = max(0, start - 600, text.rfind("\n\n", 0, start) + 1)
    blank = text.find("\n\n", end)
    hi = min(len(text), end + 600, len(text) if blank == -1 else blank)
    return any(lo <= s and e <= hi for s, e in names) and _MISSING.search(text, lo, hi) is not None


def _question_or_general(text: str, lo: int, hi: int) -> bool:
    """The sentence is a question or a general statement ("HIV nasıl bulaşır?", "Diyabet
    hastaları ne yemeli"): about the topic, not about the person named before it."""
    asks = "?" in text[lo : hi + 1] and not _MY_REQUEST.search(text, lo, hi)
    return asks or _GENERIC.search(text, lo, hi) is not None or _TOPIC.search(text, lo, hi) is not None


def _previous_sentence(text: str, name_end: int, lo: int) -> bool:
    """The name stands in one of the two sentences right before this one ("Hüseyin Kartal –
    Levotiroksin 50 mg. Kronik hastalık raporu var": Turkish drops the subject that the last
    sentences named), within 250 characters and the same paragraph."""
    if lo - name_end > 250 or "\n" in text[name_end:lo]:
        return False
    return len(_SENTENCE_END.findall(text, name_end, max(name_end, lo - 1))) <= 1


def sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around [start, end), at most 100 characters either side."""
    lo = max(0, start - 100)
    for m in _SENTENCE_END.finditer(text, lo, start):
        lo = m.end()
    hi_m = _SENTENCE_END.search(text, end, min(len(text), end + 100))
    return lo, hi_m.start() + 1 if hi_m else min(len(text), end + 100)


def _line_end(text: str, end: int) -> int:
    nl = text.find("\n", end)
    return len(text) if nl == -1 else nl


def _record(text: str, start: int, end: int) -> tuple[int, int]:
    """The record around [start, end): up to three lines either side, not past a blank line; a
    form's field ("Gönüllülük: Kızılay gönüllüsü") looks up to ten lines back, to the form's
    name field (a CV's or membership form's "Ad Soyad:" heads it)."""
    lo = text.rfind("\n", 0, start)
    back = 10 if _FORM_FIELD.match(text, lo + 1) else 3
    for _ in range(back):
        if lo <= 0 or text[lo - 1] == "\n":
            break
        lo = text.rfind("\n", 0, lo)
    hi = _line_end(text, end)
    for _ in range(3):
        if hi >= len(text) - 1 or text[hi + 1] == "\n":
            break
        hi = _line_end(text, hi + 1)
    return max(0, lo + 1, start - (800 if back > 3 else 400)), min(hi, end + 400)


_FORM_FIELD = re.compile(r"[ \t]*[^\W\d_][^\W\d_ \t]*(?:[ \t][^\W\d_]+){0,2}[ \t]*:[ \t]")
