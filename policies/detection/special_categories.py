"""KVKK Article 6 special categories of personal data, in Turkish and English, when tied to a
person: health, religion or belief, ethnic origin, political opinion, union membership, sexual
life, criminal records, biometric and genetic data, appearance (religious dress) and
association membership.

A category term (a stem: `special_categories_terms`) counts only when `person_links` ties it
to a person: "HIV nasıl bulaşır?" or "What is Ramadan?" is a general question, not personal
data, and stays routable. A finding spans the sentence that says the term of the person
(`statement`), and terms of one category in one passage (a record or paragraph) make one finding
that spans their sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.no_ones import animal_patient, animals_sentence, told_of_no_one
from fairgate.policies.detection.person_links import generic, person_word, sentence, tied_to_person
from fairgate.policies.detection.persons.lexicon import lexicon_flags, surnames
from fairgate.policies.detection.persons.non_private import life_dated_entry
from fairgate.policies.detection.special_categories_terms import (
    CATEGORIES,
    inside_a_word,
    says_mine,
    term_at,
)
from fairgate.policies.detection.special_names import (
    a_things_name,
    header_cell,
    in_a_bodys_name,
    in_address,
)
from fairgate.policies.detection.special_offences import unsentenced_offence
from fairgate.policies.detection.special_peoples import (
    WORD_PEOPLES,
    a_skill,
    origin_of_no_people,
    regions_people,
    said_of_someone,
)

SPECIAL_KINDS = CATEGORIES


def find_special(text: str, hits: list[tuple[int, int]], names: Sequence[tuple[int, int]] = (),
                 limit: int = 16) -> list[tuple[str, int, int]]:
    """(category, start, end) for every special-category term tied to a person; `hits`: where
    the trigger pass saw a term; `names`: person names the name tagger found, and TCKNs (a
    record's identity number stands for its person: "2026-12-02,<TCKN>,Concerta 36 mg")."""
    out: list[tuple[str, int, int]] = []
    for start, end in hits:
        kind = term_at(text, start, end)
        if kind is None or _in_surname(text, start, end, names) or origin_of_no_people(text, start, end) \
                or life_dated_entry(text, start) or header_cell(text, start) or in_address(text, start, end):
            continue
        if _not_this_category(text, start, end, kind, hits):
            continue
        kind = _retyped(text, start, end, kind, out)
        # a hereditary illness someone has ("annesinde Huntington hastalığı mevcut"): their health too
        for one in (kind, "health") if kind == "genetic" and _illness_had(text, start, end) else (kind,):
            _add(text, start, end, one, names, out)
        if len(out) >= limit:
            break
    return out


def _add(text: str, start: int, end: int, kind: str, names: Sequence[tuple[int, int]],
         out: list[tuple[str, int, int]]) -> None:
    """Adds the term at text[start:end] as `kind` to `out`: a new finding over its statement
    where it is tied to a person, or the finding of its category in the same passage made longer."""
    # an ancestry test's result is the genetic data too: "... %38 Kafkas, %22 Balkan"
    shares = _SHARES_AFTER.match(text, end) if kind == "genetic" else None
    lo, hi = statement(text, start, end if shares is None else shares.end())
    same = next((k for k in range(len(out) - 1, -1, -1) if out[k][0] == kind), None)
    if same is not None and (start < out[same][2] or _same_passage(text, out[same][2], start)):
        # the same category again about the same person (other categories may stand between:
        # "tarikata girdi; sarık sarıyor. Nakşibendi bir cemaate bağlıymış"): one finding
        if not told_of_no_one(text, start, end):
            out[same] = (kind, out[same][1], max(hi, out[same][2]))
        return
    # (or the record or paragraph a finding of another category tied to its person goes on:
    # "Merve Y., 19 y. Başvuru: kasık ağrısı. Cinsel olarak aktif, tek partner.")
    going_on = bool(out) and _same_passage(text, out[-1][2], start) and not _question_or_request(text, lo, hi)
    # (a supposition, a plot or a definition asked last: only of a term that would count)
    if (tied_to_person(text, start, end, names) or says_mine(text, start, end) or going_on) \
            and not told_of_no_one(text, start, end):
        out.append((kind, lo, hi))
        space = text.find(" ", start, end)
        if kind == "religion" and space != -1 and term_at(text, start, space) == "ethnicity" \
                and regions_people(text, start):
            out.append(("ethnicity", lo, hi))  # a region's ethno-religious group ("hatay arap alevisi")


def _illness_had(text: str, start: int, end: int) -> bool:
    """The genetic term at text[start:end] is a hereditary illness's name (genetic.txt lists a
    few: "huntington", "klinefelter", "down sendrom", "lynch sendrom") said as had ("babamda
    Huntington vardı", "annesinde Huntington hastalığı mevcut", "Down sendromu var"), not as a
    gene, test, carrier state or laboratory result ("Huntington geni", "huntington testi",
    "Lynch sendromu ile uyumlu"): the illness is health data as well as genetic."""
    return fold_key(text[start:end]).startswith(_ILLNESSES) and _HAD_AFTER.match(text, end) is not None


_ILLNESSES = ("huntington", "klinefelter", "down sendrom", "lynch sendrom")
# (a case ending, then the illness's or syndrome's word maybe, then "var", "vardı", "çıktı",
# "mevcut", "öyküsü", "tanısı"; not a laboratory's "ile uyumlu" or "saptandı", which reports
# the test's result: the genetic finding's)
_HAD_AFTER = re.compile(r"\w*(?:['’]\w+)?(?:[ \t]+(?:hastal|sendrom)\w*)?[ \t]+(?:var(?:d|m|$|\W)|mevcut|[öo]yk[üu]|tan[ıi]s|"
                        r"[çc][ıi]kt)", re.IGNORECASE)


def _not_this_category(text: str, start: int, end: int, kind: str, hits: list[tuple[int, int]]) -> bool:
    """What stands around the term says it is no statement of its category about a person."""
    if _subject_line(text, start) and any(h > start and term_at(text, h, he) == kind for h, he in hits):
        return True  # an e-mail's subject ("Konu: Sendika aidatı kesintisi"); its body says whose
    if kind == "health" and (_SPECIALIST_AFTER.match(text, end) or _STAFF_AFTER.match(text, end)):
        return True  # a doctor's title in a signature or a CV ("Çocuk nörolojisi uzmanı"), not their health
    if kind == "health" and (_FACILITY_AFTER.match(text, end) or (_ANIMAL_BEFORE.search(text, max(0, start - 16), start)
                                                                   and not _FROM_ANIMALS.match(text, start))):
        # a place kept for them ("engelli park yerine"), an animal's ("köpek kuduz aşısı"; not "kedi alerjim")
        return True
    if kind == "health" and (animal_patient(text) or (animals_sentence(text, start) and not _FROM_ANIMALS.match(text, start))):
        return True  # a vet's record: the patient is the owner's dog or cat; or the animal is the sentence's subject
    if kind == "health" and _COUPLES_BEFORE.search(text, max(0, start - 12), start) and _THERAPY.match(text, start):
        return True  # a couple's counselling ("çift terapisi", "evlilik terapistine"): their life together's
    if kind == "health" and _HURT.match(text, start) and _MUCH_BEFORE.search(text, max(0, start - 12), start):
        return True  # hurt feelings ("Çok kırıldık", "biraz kırıldım"), no broken bone
    if kind == "health" and (_IF_YOU_AFTER.match(text, end) or (_HEARS_BEFORE.search(text, max(0, start - 30), start)
                                                                 and _WILL_HAVE_AFTER.match(text, end))):
        # a leaflet's "if you" ("yetmezliğiniz varsa", "Hamileyseniz"): any reader's; a hyperbole
        # ("annem duysa kalp krizi geçirir", "babam duyunca kalp krizi geçirecek"): no attack had
        return True
    if kind == "biometric" and _DOCUMENT_AFTER.match(text, end):
        return True  # a kind of passport ("Biyometrik pasaportunu kopyalamamız gerekiyor"), no one's data
    if kind == "biometric" and _done_to_anyone(text, *sentence(text, start, end)):
        return True  # a procedure told to anyone ("parmak izi alınır", "verileriniz cihazınızda saklanır")
    if kind == "ethnicity" and text[start:end].lower() in WORD_PEOPLES and not said_of_someone(text, start):
        return True  # "roman", "kurt": a novel, a wolf; "Komşumuz Roman", "kayinpederim kurt": a people
    if kind == "ethnicity" and a_skill(text, start):
        return True  # a language one knows or translates ("Kürtçe ve Arapça biliyor", "Çevirmen (Ermenice–Türkçe)")
    if kind == "ethnicity" and _SHARE_BEFORE.search(text, max(0, start - 12), start) \
            and text.count("%", max(0, start - 60), end + 60) >= 2:
        return True  # one of an ancestry test's shares ("%38 Ermeni %22 Gürcü"): the genetic finding's
    if a_things_name(text, start, end, kind) or (kind == "criminal" and unsentenced_offence(text, start, end)):
        return True  # (a bare offence's name with no sentence or charge label: news, a leaflet)
    if in_a_bodys_name(text, end, kind):
        return True  # a body's or a street's name ("Kayseri Çerkes Derneği", "Gürcüler Sk."), not a person's
    # a company's, party's or apartment's board ("Holding yönetim kurulu üyesi")
    return kind == "association" and _BOARD.match(text, start) is not None and not _association_before(text, start)


def _carriers_clause(text: str, start: int, end: int) -> bool:
    """The term's clause (its sentence up to a semicolon) says someone carries a gene ("taşıyıcısı",
    "heterozigot", "talasemi minör", "premutasyonu") and no diagnosis: the disease named is the
    one carried, the test or pregnancy the carrier's, and the data the genetic finding's."""
    lo, hi = statement(text, start, end)
    lo = max(lo, text.rfind(";", lo, start) + 1)
    semi = text.find(";", end, hi)
    hi = hi if semi == -1 else semi
    return _CARRIER.search(text, lo, hi) is not None and _DIAGNOSIS.search(text, lo, hi) is None


# a carrier state ("taşıyıcısıyız", "heterozigot", "beta talasemi minör", "premutasyonu"; not a
# homozygote, who has the disease) and a diagnosis or an infection said beside it ("tanısı kondu",
# "meme ca", "kaybettik", "hepatit B taşıyıcısıyım")
_CARRIER = re.compile(r"ta[şs][ıi]y[ıi]c|heterozig|(?<!\w)min[öo]r(?!\w)|premutasyon|carrier|heterozyg", re.IGNORECASE)
_DIAGNOSIS = re.compile(r"(?<!\w)(?:tan[ıi]|kanser|ca(?!\w)|kaybet|hasta(?:l[ıi]k)?(?!\w)|[öo]ld[üu]|"
                        r"hepatit|hbv|hbsag|hiv|vir[üu]s)", re.IGNORECASE)  # (an infection's carrier is ill)


def _retyped(text: str, start: int, end: int, kind: str, out: list[tuple[str, int, int]]) -> str:
    """The term's category where what follows or precedes it moves it between health and genetic."""
    if kind == "genetic" and _INFECTION_BEFORE.search(text, max(0, start - 30), start):
        return "health"  # a carrier of an infection ("Hepatit B taşıyıcısı"), not of a gene
    if kind == "health" and _GENE_AFTER.match(text, end):
        return "genetic"  # a disease as a gene test's subject ("Kistik fibrozis taşıyıcılık paneli")
    if kind == "health" and _SYNDROME.match(text, start) and (word := _WORD_BEFORE.search(text, max(0, start - 30), start)) \
            and term_at(text, word.start(1), word.end(1)) == "genetic":
        return "genetic"  # a genetic condition's syndrome ("Klinefelter sendromu", "Turner sendromlu")
    if kind == "health" and _carriers_clause(text, start, end):
        return "genetic"  # a carrier's result and what it leads to ("akdeniz anemisi taşıyıcısı çıktık, gebelikte test")
    if kind == "health" and _RISK_AFTER.match(text, end) and _after_genetic(text, out, start):
        return "genetic"  # a gene's risk or an embryo screening for it ("apoe4 taşıyıcısıyım, alzheimer riskim")
    if kind == "health" and _refused_for_belief(text, start, end, out):
        return "religion"  # a treatment refused for a belief ("Yehova Şahidi olarak kan nakli kabul etmiyorum")
    if kind == "health" and _MARK.search(fold_key(text[start:end])) and _FACE_BEFORE.search(text, max(0, start - 30), start):
        return "appearance"  # a scar or burn mark on the face is how one looks ("yüzünde derin bir yanık izi")
    if kind == "politics" and _OFFICE.search(text, start, end) \
            and _association_before(text, start, sentence(text, start, end)[0]):
        return "association"  # an office in an association ("Kızılay'ın ilçe kadın kollarında", "Derneğin başkanlığına aday")
    return kind


def _refused_for_belief(text: str, start: int, end: int, out: list[tuple[str, int, int]]) -> bool:
    """The term's sentence refuses or will not have the treatment it names, and a belief found
    before in that sentence says why ("Yehova'nın Şahitleri cemaatinden olduğu için kan
    transfüzyonunu reddetti", "Sih inancı gereği türbanını çıkarmak istemedi"): the data is the belief."""
    lo, hi = sentence(text, start, end)
    return _REFUSES.search(text, end, hi) is not None and any(k == "religion" and s < start and lo < e for k, s, e in out)


# a refusal after the treatment: "reddetti", "kabul etmiyorum", "istemedi", "refused"
_REFUSES = re.compile(r"(?<!\w)(?:redd?e[dt]|kabul[ \t]+etm[ie]|iste(?:m[ie]|mez)|refuse)", re.IGNORECASE)


def statement(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence that says a term of a person (`person_links.sentence`, 100 characters either
    side at most) within its line, without the spaces and the stop around it: the data is what
    the sentence says ("KOAH atak tablosuyla yatıyor, O2 2 lt/dk nazal"), not the one word that
    names its category. Returns (start, end)."""
    lo, hi = sentence(text, start, end)
    lo = max(lo, text.rfind("\n", 0, start) + 1)  # a record's line ends its field ("2207,Aram,...")
    line_end = text.find("\n", end)
    hi = min(hi, len(text) if line_end == -1 else line_end)
    hi = max(end, hi - 1 if hi > end and text[hi - 1] in _STOPS else hi)
    while lo < start and text[lo].isspace():
        lo += 1
    while hi > end and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


_STOPS = ".!?\n"


def a_people(text: str, name: tuple[int, int], hits: Sequence[tuple[int, int]]) -> bool:
    """A one-word name that is a people's name ("babam Arnavut", "Ben de Kürt'üm", "Özbek
    kökenli", "Ben Lazım,"): the lexicons list many peoples as given names or surnames, but
    alone, where the trigger pass reads the word (or a phrase around it) as an ethnicity term, it
    is an origin, not a person. (After a given name it is a surname: "Oya Türkmen".)"""
    s, e = name
    if any(c.isspace() for c in text[s:e]):
        # a relation or another people before the origin ("Annem Lazdır", "Kosovalı Arnavut"): no name
        words = [(w.start() + s, w.end() + s) for w in _NAME_WORD.finditer(text[s:e])]
        origins = [a_people(text, w, hits) for w in words]
        return any(origins) and all(o or person_word(fold_key(text[a:b])) for o, (a, b) in zip(origins, words, strict=True))
    return any((h == s or h <= s and e <= he) and term_at(text, h, he) == "ethnicity" for h, he in hits)


_NAME_WORD = re.compile(r"[^\s]+")


def names_a_term(text: str, name: tuple[int, int], hits: list[tuple[int, int]]) -> bool:
    """The name's words are a category term's but for a case ending ("Hüda-Par'ın", "Nor
    Zartonk'ta", "Yehova Şahidi", "Eğitim Sen'e", "Yeniden Refah'a"): a party, union, association,
    belief or test so named, not a person. A one-word given name that is a term alone ("Behçet",
    "Hanefi") stays a name: the term must reach past it on either side for that. (A people's name is
    `a_people`'s: a surname may be one, "Oya Türkmen".)"""
    s, e = name
    stem = s + len(_CASE_ENDING.split(text[s:e], maxsplit=1)[0])
    for hs, he in hits:
        # (a term is a stem: it may end inside the name's last word, "Yehova Şahid|i")
        if hs <= s < he and (stem <= he or not _SPACE.search(text, he, stem)) \
                and term_at(text, hs, he) not in (None, "ethnicity"):
            return hs < s or he > stem or _SPACE.search(text, s, stem) is not None \
                or "g" not in lexicon_flags().get(fold_key(text[s:stem]), "")
    return False


_CASE_ENDING = re.compile("['’]")
_SPACE = re.compile(r"\s")

def _in_surname(text: str, start: int, end: int, names: Sequence[tuple[int, int]]) -> bool:
    """The term is a surname after a given name ("Ersin Tatar", "Ayşe Türkmen"), not a category:
    inside a name found, or capitalised right after one, with its case ending or more of its
    clause after it ("Oya Türkmen'in", "Ahmet Türkmen bugün gelmedi"; not "Komşum Ayşe Kürt.",
    "Ayşe Kürt ve ...", "Ekin'in Kürt olması", said of her)."""
    inside = any(s < start < e for s, e in names)
    if inside and inside_a_word(text, end) and not any(c.isspace() for c in text[start:end]):
        return True  # the start of a longer word of the name ("Ayten Kurtcebe": not "Kurtçe")
    word = fold_key(text[start:end]).split("'")[0]
    if word not in surnames():
        return False
    return inside or (
        text[start].isupper() and _SURNAME_GOES_ON.match(text, end) is not None
        and any(e == start - 1 and text[e] == " " and not _SUFFIXED.search(text, s, e) for s, e in names))


# after a surname: its case ending, or a word of its clause that no predicate's "is" or "and" is
_SURNAME_GOES_ON = re.compile(r"\w*(?:['’][^\W\d_]|[ \t]+(?!(?:ve|ama|fakat|de|da|değil|degil|mi|mı|mi[şs]|"
                              r"ol\w*|diye|k[öo]kenli|asıllı|asilli)(?!\w))[^\W\d_])", re.IGNORECASE)
_SUFFIXED = re.compile("['’]")  # a name with its case ending ("Ekin'in Kürt olması") ends before a predicate


# the face or a visible part of it, then at most two words, before a mark ("YÜZÜNDE DERİN BİR YANIK İZİ",
# "alnında yanık izi"), not a hand's ("elindeki yanık izi" is why a fingerprint fails)
_MARK = re.compile(r"(?<!\w)(?:iz|izi|izleri)(?!\w)")  # a mark's word in a term, folded ("yanik izi")
_FACE_BEFORE = re.compile(r"(?<!\w)(?:y[üu]z[üu]n|yana[ğg][ıi]n|aln[ıi]n|[çc]enesin|ka[şs][ıi]n)(?:de|da)(?:ki)?"
                          r"(?:[ \t]+[^\W\d_]+){0,2}[ \t]+\Z", re.IGNORECASE)
_INFECTION_BEFORE = re.compile(r"(?:hepatit|hbv|hcv|hiv|hbsag|virüs|virus|covid|mikrop|bakteri)\w*[ \t\-]*(?:[a-z]\b)?[ \t]*\Z",
                               re.IGNORECASE)
# a carrier state, a gene or a gene panel named right after a disease ("Akdeniz anemisi
# taşıyıcısıyız", "Kistik fibrozis CFTR gen analizi", "Kalıtsal Kanser Paneli"; not a test
# ordered for a suspected disease: "Akdeniz ateşi şüphesiyle gen testi")
_GENE_AFTER = re.compile(r"\w*(?:[ \t\-]+[\w\-]+){0,2}?[ \t\-]+(?:ta[şs][ıi]y[ıi]c[ıi]|gen(?:i|in|inde)(?!\w)|(?-i:[A-Z][A-Z0-9]{2,})[ \t]+gen(?!\w)|panel)",
                         re.IGNORECASE)
# an ancestry test's shares after it in the same line: two or more "%38 Kafkas" ("%41 Kafkasya,
# %23 Anadolu ve %9 Doğu Avrupa çıktı", "%38 balkan %22 kafkas")
_SHARE = r"%[ \t]?[0-9]{1,3}(?:[,.][0-9]{1,2})?[ \t]+[^\W\d_]+(?:[ \t]+(?-i:[A-ZÇĞİÖŞÜ])[^\W\d_]+)?"
_SPECIALIST_AFTER = re.compile(r"\w*[ \t]+(?:uzman[ıi]|hekimi|specialist)[ \t]*(?:\n|\Z|[,;|)—–-])", re.IGNORECASE)
# a department's staff ("Dahiliye servisinden hemşire arkadaşımız", "Onkoloji sekreteri"): their post, not their health
_STAFF_AFTER = re.compile(r"\w*(?:[ \t]+(?:servis|poliklini|klini|b[öo]l[üu]m|birim)\w*)?[ \t]+"
                          r"(?:hem[şs]ire|doktor|sekreter|personel|tekniker|teknisyen|asistan|komite)\w*", re.IGNORECASE)
_FACILITY_AFTER = re.compile(r"\w*[ \t]+(?:park|otopark|rampa|tuvalet|wc|asans[öo]r)", re.IGNORECASE)
_ANIMAL_BEFORE = re.compile(r"(?<!\w)(?:k[öo]pe[kğg]|kedi|hayvan|evcil)\w*[ \t]+\Z", re.IGNORECASE)
_FROM_ANIMALS = re.compile(r"alerj|allerj|[ıi]s[ıi]r|t[üu]y", re.IGNORECASE)  # what people get from animals
_COUPLES_BEFORE = re.compile(r"(?<!\w)(?:[çc]ift|evlilik)[ \t]+\Z", re.IGNORECASE)
_THERAPY = re.compile(r"terap", re.IGNORECASE)
_SYNDROME = re.compile(r"sendrom|syndrome", re.IGNORECASE)
_HURT = re.compile(r"k[ıi]r[ıi]ld", re.IGNORECASE)
# the reader's condition ("yetmezliğiniz varsa", "Hamileyseniz", "alerjiniz olursa"), right after the term
_IF_YOU_AFTER = re.compile(r"(?:\w*[ \t]+)?\w*?(?:n[ıiuü]z[ \t]+(?:varsa|olursa|yoksa)|ysan[ıi]z|ysen[iı]z|san[ıi]z|sen[iı]z)(?!\w)",
                           re.IGNORECASE)
# one who would hear or see it ("duysa", "duyunca", "görürse"), then "will have" the term ("geçirir", "geçirecek")
_HEARS_BEFORE = re.compile(r"(?<!\w)(?:duy|g[öo]r|[öo][ğg]ren)\w*(?:sa|se|nca|nce)[ \t]+\Z", re.IGNORECASE)
_WILL_HAVE_AFTER = re.compile(r"\w*[ \t]+ge[çc]ir(?:ir|ecek|icek|ebilir)(?!\w)", re.IGNORECASE)
_MUCH_BEFORE = re.compile(r"(?<!\w)(?:[çc]ok|biraz|fena|epey|ger[çc]ekten)[ \t]+\Z", re.IGNORECASE)
# an impersonal passive's aorist, what is done to anyone ("alınır", "saklanır", "oluşturulur", "alınmaz";
# not a past event's "alındı", a plan's "alınacak", nor an ability's "tanımlanabilir")
_PASSIVE_AORIST = re.compile(r"(?<!\w)\w{2,}?(?<![bB])(?:[ıiuü][ln]|[aeıioöuü]n)(?:[ıiuü]r|maz|mez)(?!\w)", re.IGNORECASE)


def _done_to_anyone(text: str, lo: int, hi: int) -> bool:
    """text[lo:hi] has an impersonal passive's aorist (not a name of that shape: "Ayşenur", "Yılmaz")."""
    return any("g" not in (f := lexicon_flags().get(fold_key(m.group()), "")) and "s" not in f
               for m in _PASSIVE_AORIST.finditer(text, lo, hi))


_DOCUMENT_AFTER = re.compile(r"\w*[ \t]+(?:pasaport|passport)", re.IGNORECASE)
_SHARE_BEFORE = re.compile(r"%[ \t]?[0-9]{1,3}(?:[,.][0-9]{1,2})?[ \t]+\Z")
_SHARES_AFTER = re.compile(rf"[^\n%]{{0,80}}?{_SHARE}(?:[ \t]*(?:,|;|ve|and)?[ \t]*{_SHARE})+", re.IGNORECASE)
# a board's office or a notice to a member (association.txt's last lines) and the bodies that may
# stand before it: the nearest decides ("Kızılay Ereğli şubesinin yönetim kurulunda", not "partinin ilçe yönetim kurulunda")
_BOARD = re.compile(r"y[öo]netim[ \t]+kurul|[şs]ube|[üu]yeli[ğg]i(?:niz|[ \t]+y[öo]netim)|(?:say[ıi]n|de[ğg]erli)[ \t]+[üu]yemiz",
                    re.IGNORECASE)
_BODIES = re.compile(
    r"(?<!\w)(?:(?P<club>derne[kğg]|vak[ıi]f|vakf|kul[üu]b|k[ıi]z[ıi]lay|cemiyet|birli[ğg]i|rotary|lions|l[öo]sev|"
    r"ye[şs]ilay|mezunlar)|parti|sendika|holding|[şs]irket|banka|belediye|kooperatif|site[ \t]+y[öo]netim|a\.[şs]\.)",
    re.IGNORECASE)


# a politics term that names an office or a branch, which associations have too
_OFFICE = re.compile(r"kol|ba[şs]kan|y[öo]netim|aday|delege|se[çc]il", re.IGNORECASE)


def _association_before(text: str, start: int, since: int = 0) -> bool:
    """The body nearest before `start` in the paragraph (200 characters at most, none before
    `since`) is an association, foundation or club."""
    lo = max(since, start - 200, text.rfind("\n\n", 0, start))
    bodies = list(_BODIES.finditer(text, lo, start))
    return bool(bodies) and bodies[-1].group("club") is not None


_SUBJECT = re.compile(r"[ \t]*(?:konu|subject|re|fw|fwd|ynt|ilt)[ \t]*:", re.IGNORECASE)


def _subject_line(text: str, start: int) -> bool:
    """The term stands in an e-mail's subject line ("Konu: ...", "Subject: ...", "RE: ...")."""
    line = text.rfind("\n", 0, start) + 1
    return text.find(":", line, line + 12) != -1 and _SUBJECT.match(text, line) is not None


_WORD_BEFORE = re.compile(r"([^\W\d_]+)[ \t]+\Z")
# a disease's risk, or a screening for it, in the clause after the term (not a diagnosis)
_RISK_AFTER = re.compile(r"[^\n.!?,;]{0,40}?(?:risk|tarama|eleme|screening)", re.IGNORECASE)


def _after_genetic(text: str, out: list[tuple[str, int, int]], start: int) -> bool:
    """A genetic finding ends in the same passage before `start`: the passage is a gene test's."""
    return any(kind == "genetic" and s < start and (start < e or _same_passage(text, e, start)) for kind, s, e in out)


# a question, a request or a general statement in the passage: about the topic, not the person
# ("Müşterimiz E. Ş. Süryani. DNA testi ne kadar sürer?", "... Kürt sorunu üzerine bir makale özetle.",
# "... The Jewish holidays this year start in September.")
_ASKS = re.compile(r"\?|(?<!\w)(?:özetle|ozetle|açıkla|acikla|anlat|yaz|çevir|explain|describe|summari[sz]e|write|"
                   r"nedir|nelerdir|nasıl|nasil|ne kadar|the)(?!\w)", re.IGNORECASE)


def _question_or_request(text: str, lo: int, hi: int) -> bool:
    """The sentence `lo`..`hi` (and its stop) asks or requests something, or says something general."""
    return _ASKS.search(text, lo, min(len(text), hi + 1)) is not None or generic(text, lo, hi)


def _same_passage(text: str, last_end: int, start: int) -> bool:
    """Within 300 characters and no blank line: a record or a paragraph about one person (a
    discharge note's diagnosis, then its surgery and discharge)."""
    return start - last_end <= 300 and "\n\n" not in text[last_end:start]
