"""Person names in text: candidate tokens scored by the learned tagger, then joined into names.

Consecutive tokens the tagger accepts form one name when only spaces, a hyphen or an initial's
dot stand between them. A name right before an organisation or place word ("Sabiha Gökçen
Havalimanı", "Yıldız Holding", "Atatürk Caddesi") or a title's head ("Şikâyet Kaydı") is not a
person's data, nor are firms, quarters, public figures, life-dated names and unions
(`non_private`).
"""

from __future__ import annotations

import re
from bisect import bisect_left

from fairgate.policies.detection import dfa
from fairgate.policies.detection.gazetteer import fold_key, given_names
from fairgate.policies.detection.person_links import my_relation
from fairgate.policies.detection.persons.alone import at_a_place, called, initialled_lower
from fairgate.policies.detection.persons.brands import household_brand
from fairgate.policies.detection.persons.cues import (
    HONORIFICS,
    LOWER_NOT_NAMES,
    coordinated,
    cued_names,
    label_or_things_name,
    proper_given_names,
    repeated,
)
from fairgate.policies.detection.persons.doubted import FLOOR, doubted_names, plural_word
from fairgate.policies.detection.persons.features import (
    CUES,
    WORD,
    Doc,
    candidates,
    line_casing,
    may_name,
    token_info,
)
from fairgate.policies.detection.persons.handles import handle_names
from fairgate.policies.detection.persons.holidays import holiday
from fairgate.policies.detection.persons.inflected import inflected_names
from fairgate.policies.detection.persons.initials import initials
from fairgate.policies.detection.persons.lexicon import (
    AFTER_NAME,
    HEADINGS,
    NOT_NAMES,
    plain_words,
)
from fairgate.policies.detection.persons.name_words import never_a_name
from fairgate.policies.detection.persons.non_private import (
    UNION_NAME,
    dated,
    firm,
    only_places,
    origin_word,
    public_figure,
    public_role,
    quoted_product,
    verb_form,
    verb_idiom,
    word_problem,
)
from fairgate.policies.detection.persons.non_private import joined as _joined
from fairgate.policies.detection.persons.not_people import kin_titled, something_else
from fairgate.policies.detection.persons.pairs import lexicon_pairs
from fairgate.policies.detection.persons.partners import uncased_partners
from fairgate.policies.detection.persons.tagger import default_tagger

# the tagger trained on the tuning parts' rows too: whole-part 4-fold cross-validation (issue 33,
# 2026-12-06) pooled person_name recall / precision 0.9634 / 0.9519 at 0.5, 0.9623 / 0.9529 at
# 0.6, 0.9609 / 0.9538 at 0.7 (the tagger before: 0.9468 / 0.9521 at 0.5)
THRESHOLD = 0.6
THRESHOLD_UNCASED = 0.8  # in lower-case or all-capitals lines casing gives no evidence
_CHUNK = 512  # candidates scored per numpy pass (stops early once `limit` names are found)
_WINDOW = 16_384  # characters read per window of a long text
# ~8 µs a candidate: past this many (about 200 KB of capitalised words, not prose) the text is
# kept local unscanned rather than scanned for seconds
MAX_CANDIDATES = 25_000
_LETTER_PAIR = dfa.program(r"\pL\pL")
_LETTERS = re.compile(r"[^\W\d_]+")  # letter runs (re: the re2 wrapper builds a match per hit)
_SENTENCE_GAPS = frozenset("^.N!?:~\"")  # `Doc.gap` marks before a sentence's first word


def find_person_names(text: str, limit: int = 16) -> list[tuple[int, int]] | None:
    """(start, end) of person names in `text` (at most `limit`); None when the text has more
    candidate tokens than `MAX_CANDIDATES` and found no name in them (the caller keeps it local).
    Long texts are read in windows of about 16 KB (cut at a line end), so reading stops once
    `limit` names are found. A social media handle made of a name ("@duygu_sarac") is one whole."""
    found = _tokens_names(text, limit)
    if found is None or "@" not in text:
        return found
    handles = handle_names(text)
    return sorted([n for n in found if not any(s < n[1] and n[0] < e for s, e in handles)] + handles)[:limit]


def _tokens_names(text: str, limit: int) -> list[tuple[int, int]] | None:
    if not dfa.occurs(_LETTER_PAIR, text.encode("utf-8", "surrogatepass")):
        return []  # digits, separators, "a@a@": no word to read (one DFA pass, not a regex scan)
    if _opener_only(text):
        return []
    out: list[tuple[int, int]] = []
    budget = MAX_CANDIDATES
    for lo, hi in _windows(text):
        doc = Doc.of(text[lo:hi])
        found, budget = _scan(doc, limit - len(out), budget)
        out += [(lo + s, lo + e) for s, e in found]
        if len(out) >= limit:
            return out[:limit]
        if budget <= 0:
            return out or None
    return out


def _windows(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + _WINDOW)
        if end < len(text):
            cut = max(text.rfind("\n", start + _WINDOW // 2, end), text.rfind(" ", end - 200, end))
            end = cut + 1 if cut != -1 else end
        out.append((start, end))
        start = end
    return out


def _scan(doc: Doc, limit: int, budget: int) -> tuple[list[tuple[int, int]], int]:
    """Names in one window and the candidate budget left."""
    cands = candidates(doc)
    if cands == [0] and _plain_opener_alone(doc):
        return [], budget - 1  # "Say hello in five words": no rule below can find a name
    return _scan_candidates(doc, cands, limit, budget)


def _plain_opener_alone(doc: Doc) -> bool:
    """The only candidate is a first word that is a prompt's plain word with no case suffix
    ("Say", "Write", "Nasıl"), in mixed-case lines, before no capitalised word, in a text with
    no honorific. Then every rule of `_scan_candidates` finds nothing: the tagger scores only a
    word that can stand as a name alone or is joined to another candidate (`_may_end_in_a_name`:
    a plain word cannot, and there is no other), a lexicon pair needs a capitalised second word,
    a suffixed name a suffix, a title an honorific, a proper given name or a chat speaker no
    plain word; cues and initials are read only past the first word, and the lower-case and
    capitals rules (`_same_people`) only in such lines. A short prompt skips the set-up."""
    modes, first = doc.modes(), doc.info(0)
    if first.suffix or first.key not in plain_words() or "lower" in modes or "caps" in modes:
        return False
    if len(doc.spans) > 1 and doc.info(1).shape in "CU":
        return False
    return not any(info.key in HONORIFICS for info in doc.infos())


def _opener_only(text: str) -> bool:
    """`_plain_opener_alone` read off a one-line text without its tokens, where the only
    capital is the first character ("Say hello in five words"): no later token is capitalised,
    so the first is the only candidate of the mixed-case line, and the rule settles it. An
    honorific is looked for among all the letter runs, folded one by one (a superset of the
    tokens' keys; folding maps letters to letters one by one, so the runs are the folded text's)."""
    if "\n" in text or not text[:1].isupper() or not text[1:].islower():
        return False
    first = WORD.match(text)
    if first is None or line_casing(text) != "mixed":
        return False
    info = token_info(first.group())
    if info.suffix or info.key not in plain_words() or not may_name(info.flags):
        return False
    return HONORIFICS.isdisjoint(map(fold_key, _LETTERS.findall(text)))


def _scan_candidates(doc: Doc, cands: list[int], limit: int, budget: int) -> tuple[list[tuple[int, int]], int]:
    """Names in one window from its candidate tokens `cands`, and the candidate budget left."""
    out: list[tuple[int, int]] = []
    titled = set(_titled(doc))  # names by their context, joined with the tagger's tokens
    sure = set(titled)
    tagger = default_tagger()
    for c in range(0, len(cands), _CHUNK):
        chunk = cands[c : c + min(_CHUNK, budget)]
        if chunk and chunk[-1]:  # (not "Say hello ...": only a first word may be a name there)
            cued = cued_names(doc, chunk)
            titled.update(cued)
            sure.update(cued)
        proper = proper_given_names(doc, chunk)
        titled.update(proper)
        sure.update(proper)
        kept = {*lexicon_pairs(doc, chunk), *_suffixed_names(doc, chunk), *titled}
        # a token the rules keep is a name's whatever its score, so it is not scored; but in a line
        # of capitals, where a token the tagger accepts pairs up with its neighbours (`partners`)
        scored = [i for i in _may_end_in_a_name(doc, chunk, titled) if i not in kept or doc.mode(i) == "caps"]
        probs = tagger.scores(doc, scored)
        accepted, doubted = [], []
        for i, p in zip(scored, probs, strict=True):
            if p >= (THRESHOLD if doc.mode(i) == "mixed" else THRESHOLD_UNCASED):
                accepted.append(i)
            elif p >= FLOOR:
                doubted.append(i)
        accepted += doubted_names(doc, doubted)  # the lexicons vouch for some of them
        accepted += uncased_partners(doc, accepted)
        out += _names(doc, sorted({*accepted, *kept}), sure)
        titled = set()
        if len(out) < limit and chunk and chunk[-1]:
            out += [n for n in initials(doc, chunk) if not any(s < n[1] and n[0] < e for s, e in out)]
            if "lower" in doc.modes():  # ("ozan b.": read only where a line is in lower case)
                out += [n for n in initialled_lower(doc, chunk) if not any(s < n[1] and n[0] < e for s, e in out)]
        budget -= len(chunk)
        if len(out) >= limit or budget <= 0:
            break
    if len(out) >= limit or (not out and "lower" not in (modes := doc.modes()) and "caps" not in modes):
        return out, budget  # enough found; or none, and no "ayşe ile ali" in a line without casing
    return out + _same_people(doc, out), budget


def _same_people(doc: Doc, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """More names about the people `found`: across "ve" / "ile", and their words again alone
    (and a pair of given names joined so in a lower-case or capitals line, found or not)."""
    spans = doc.spans
    tokens: set[int] = set()
    for s, e in found:
        i = bisect_left(spans, (s, 0))
        while i < len(spans) and spans[i][1] <= e:
            tokens.add(i)
            i += 1
    extra = set(coordinated(doc, tokens)) | set(repeated(doc, tokens)) | set(inflected_names(doc))
    if not extra:
        return []
    return [n for n in _names(doc, sorted(extra), extra) if not any(s < n[1] and n[0] < e for s, e in found)]


def _may_end_in_a_name(doc: Doc, chunk: list[int], titled: set[int]) -> list[int]:
    """The candidates whose score can change the names found: not a word that is never a name,
    and either joined to another token that may be part of a name or able to stand as a name
    alone (`_single_name_ok`). The rest ("Say hello ...": a capitalised common word at a
    sentence's start) are dropped whatever the tagger says, so they are not scored: a short
    plain prompt costs no tagger pass."""
    pool = {i for i in chunk if not never_a_name(doc, (info := doc.info(i)), i)
            and not (info.shape == "L" and info.key in LOWER_NOT_NAMES) and not label_or_things_name(doc, i)}
    near = pool | titled
    n = len(doc.spans)
    return [i for i in sorted(pool)
            if (i - 1 in near and _joined(doc, i - 1)) or (i + 1 in near and i + 1 < n and _joined(doc, i))
            or _single_name_ok(doc, i)]


def _names(doc: Doc, accepted: list[int], sure: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    accepted = [i for i in accepted if not verb_form(doc.info(i).key) and (i in sure or not plural_word(doc.info(i)))]
    text = doc.text
    figures: set[str] = set()  # the words of public figures' names met so far
    made_up = word_problem(text)  # "Problem 3: Ayşe'nin 24 bilyesi vardır ... kaç bilyesi kalır?"
    k = 0
    while k < len(accepted):
        first = last = accepted[k]
        k += 1
        while k < len(accepted) and accepted[k] == last + 1 and _joined(doc, last):
            last = accepted[k]
            k += 1
        start, end = doc.spans[first][0], doc.spans[last][1]
        nxt = last + 1
        if (nxt < len(doc.spans) and _joined(doc, last) and ("o" in (after := doc.info(nxt)).flags
                                                             or (after.key in HEADINGS and after.shape != "L"))) \
                or (last > first and "o" in doc.info(last).flags) or firm(doc, first, last):
            continue  # "Yıldız Holding", "Atatürk Caddesi", "Kurtuluş Savaşı'nda" taken whole
        if figures and {doc.info(i).key for i in range(first, last + 1)} <= figures:
            continue  # the public figure again ("Aziz Sancar (d. ...) ... Sancar, öğrencilere")
        if dated(doc, last) or public_figure(doc, first, last) or public_role(doc, first):
            figures |= {doc.info(i).key for i in range(first, last + 1)}
            continue
        if something_else(doc, first, last):
            continue  # a disease's finder, a town, an entry's figure, a character (`not_people`)
        if only_places(doc, first, last) or origin_word(doc, first, last) or verb_idiom(doc, first) \
                or (first == last and my_relation(text[start:end])) \
                or quoted_product(doc, first, last) or household_brand(doc, first, last) \
                or (first > 0 and _joined(doc, first - 1) and household_brand(doc, first - 1, last)) or holiday(doc, first, last) \
                or (made_up and first == last):
            continue
        if UNION_NAME.search(text, max(0, start - 1), end):
            continue  # a union's name: "Eğitim-Sen'e", "Tüm Bel-Sen'de", "DEV MADEN-SEN'E", "Tes-İş"
        if end - start < 3 or (first == last and first not in sure and not _single_name_ok(doc, first)):
            continue  # "de", "T.", "çağrı 0532...", "Proje Kırmızı": not enough for a name alone
        out.append((start, end))
    return out


# titles written before a person's name (not "öğretmen", "müdür": "Müdür Aydın'dan döndü" is a trip)
_BEFORE_NAME = frozenset(("sayin", "dr", "doc", "prof", "av", "uzm", "op", "bay", "bayan", "mr", "mrs", "ms"))
def _titled(doc: Doc) -> list[int]:
    """Words right before an honorific that follows a name ("garbis bey", "ZOZAN HANIM", "Kemal
    amca"), in any casing: Turkish writes these titles after a person's name, so a word there that
    is no common, place, organisation or title word is a name even where the tagger doubts it."""
    out: list[int] = []
    infos = doc.infos()
    after = HONORIFICS
    for i in range(len(infos) - 1):
        title = infos[i + 1].key
        if title not in after or not _joined(doc, i):
            continue
        info = infos[i]
        # an inflected one ("teyzem", "abinin") only after a given name; a capitalised given name
        # that is also a common word ("Kudret abinin") is the name
        given = "g" in info.flags
        if (not given and title not in AFTER_NAME) or (i + 2 < len(infos) and "o" in infos[i + 2].flags) \
                or kin_titled(info.key):
            continue  # "Eşref Efendi Sokak": a street; "Eşi teyze": a relation called by a title
        # a common given name ("sevgi hanım", "gönül hanıma") is one in any casing, even where it is a word too
        bad = "otp" if given and ((info.shape == "C" and doc.mode(i) == "mixed") or info.key in given_names()) \
            else "cotpv"
        if info.shape in "CUL" and len(info.key) >= 3 and not never_a_name(doc, info, i) \
                and not any(c in info.flags for c in bad):
            out.append(i)
    return out


def _suffixed_names(doc: Doc, tokens: list[int]) -> list[int]:
    """Lexicon names written as proper nouns: with an apostrophe case suffix (Turkish writes one
    only after a proper noun: "Şehmus'u", "Kevork'un") and no place, organisation or title word.
    Mid-sentence and capitalised, a given name or surname; a given name also where it is a
    common word or a village too ("Gizem'in", "Ozan'la"), at a sentence's start, and in a line
    of capitals or lower case ("selin'le", "DERİN'İN"), but there not with a locative or
    ablative ending ("Levent'teki", "Ramazan'dan": a district's, a month's), nor after a hyphen."""
    out: list[int] = []
    for i in tokens:
        info = doc.info(i)
        if not info.suffix or info.key in NOT_NAMES or any(c in info.flags for c in "ot"):
            continue
        if "p" in info.flags:
            if "g" in info.flags and i > 0 and doc.info(i - 1).key in _BEFORE_NAME and doc.gap(i) in ("_", "."):
                out.append(i)  # "Sayın Aydın'dan", "Dr. Aydın'a": a title names the person after it
            continue
        gap = doc.gap(i)
        mixed, mid = doc.mode(i) == "mixed", gap[:1] not in ("^", ".", "N")
        if (mixed and info.shape != "C") or len(info.key) < 3 or "-" in gap:
            continue  # "Bel-Sen'de", "No'lu": a compound's or an abbreviation's suffix
        if mixed and mid and ("g" in info.flags or "s" in info.flags) and not any(c in info.flags for c in "vc"):
            out.append(i)  # "Şehmus'u", "Kaya'yı"
        elif "g" in info.flags and info.suffix[:1] not in ("d", "t"):
            out.append(i)
    return out


def _single_name_ok(doc: Doc, i: int) -> bool:
    """A one-word name needs more evidence where it could be an ordinary word: in a lower-case
    or all-capitals line, or when it is a common or plain word ("Kırmızı", "Bora", "Write"), a cue before it
    ("eşim", "sayın"), a title or "diye biri" after it ("Hanım", "amca"), a case suffix ("berk'le"; a place's
    case only on a given name: "Uzunyayla'dan" is a plain), the text's last word (a signature), or in such
    a line a word known only as a given name ("dilnaz", "rênas"); an initial alone is never a name."""
    info = doc.info(i)
    if info.shape == "I":
        return False
    titled = i + 1 < len(doc.spans) and doc.info(i + 1).key in HONORIFICS
    if titled and kin_titled(info.key):
        return False  # "Eşi teyze": a relation called by a title
    cue = (i > 0 and doc.info(i - 1).key in CUES) or titled or called(doc, i)
    if info.suffix:  # (but a place's case on a word no list gives as a given name: "Alsancak'ta", "Uludağ'a")
        return cue or "g" in info.flags or not at_a_place(doc, i)
    if doc.mode(i) != "mixed":  # (no common word, verb or place: "dilnaz"; the last word as a signature, no verb: "riski artar.")
        return cue or info.flags == "g" or (i == len(doc.spans) - 1 and (i == 0 or doc.gap(i)[:1] != "_" or not doc.text.endswith(".")))
    if cue or ("c" not in info.flags and info.key not in plain_words()):
        return True
    # a common given name that is also a word ("Pınar", "Onur", "Umut"), capitalised mid-sentence
    # (Turkish capitalises a word there only when it is a proper noun)
    return i > 0 and info.key in given_names() and doc.gap(i)[:1] not in _SENTENCE_GAPS
