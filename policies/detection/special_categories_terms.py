"""The KVKK Article 6 category terms (Turkish and English), shared by the detector and the
trigger pass. Turkish letters are matched loosely (dotless/accentless forms too).

Terms are stems: a term matches at the start of a word and any suffix may follow, so
"kemoterapi" also finds "kemoterapisi", "kemoterapiye" and "kemoterapideyim" (Turkish is
agglutinative; a stem prefix costs nothing in the trigger pass's DFA, where running a stemmer
on every word would). Markers: "=" keeps a term's letters exact ("Kürt" is an ethnic origin,
"Kurt" a common surname); a trailing "$" makes it a whole word, optionally with an apostrophe
suffix ("Laz", not "lazım"; "gay", not "gayret").
"""

from __future__ import annotations

import re

TERMS = {
    "health": "hiv$|aids$|diyabet|şeker hasta|tip 1 dm|tip 2 dm|tip 1 diyabet|tip 2 diyabet|kanser|tümör|lösemi|lenfoma|"
              "depresyon|anksiyete|panik atak|şizofreni|bipolar|psikoz|obsesif|dehb$|epilepsi|sara hastal|hepatit|"
              "tüberküloz|verem|kemoterapi|radyoterapi|diyaliz|hemodiyaliz|diyalize|böbrek yetmezli|kalp hasta|"
              "kalp kriz|kalp yetmezli|beyin kanama|felç|inme geçir|anjiyo|bypass|by-pass|stent|koah|astım|"
              "hipertansiyon|tansiyon hasta|alzheimer|demans|parkinson|otizm|down sendrom|multipl skleroz|"
              "ms hastas|als hastas|migren|fıtığ|fıtık|apandisit|protez ameliyat|ameliyatı ol|ameliyat oldu|"
              "ameliyat ol|tiroid|guatr|çölyak|crohn|ülseratif|romatoid|ankilozan|spondilit|lupus|fibromiyalji|"
              "akdeniz ateş|fmf$|talasemi|hamile|gebelik|kürtaj|tüp bebek|kısırlık|infertilite|alkol bağımlı|"
              "madde bağımlı|bağımlılık tedavi|engelli|engel oran|kan grubu|kardiyoloji|onkoloji|psikiyatri|"
              "nöroloji|antidepresan|antipsikotik|sertralin|essitalopram|metformin|insülin|levotiroksin|"
              "kronik hastal|hastalık raporu|sağlık raporu|istirahat raporu|raporlu|antiretroviral|tenofovir|"
              "psikiyatrik|covid pozitif|hasta yatış|yoğun bakım|"
              "cancer|diabetes|diabetic|depression|schizophrenia|chemotherapy|dialysis|epilepsy|hepatitis",
    "religion": "müslüman|hristiyan|hıristiyan|musevi|yahudi|alevi|sünni|şii$|ateist|deist|agnostik|budist|"
                "yehova şahi|süryani ortodoks|ortodoks|katolik|protestan|ezidi|yezidi|din: |dinini değiştir|"
                "namaz kıl|oruç tut|cemevine|kiliseye gid|pazar ayin|inancına mensup|mezhebi|"
                "muslim|christian|jewish|atheist|buddhist|hindu$|catholic|protestant",
    "ethnicity": "=kürt|kürd|ermeni|süryani|=çerkez|=çerkes|=cerkes|=laz$|=rum$|rum asıllı|=roman olduğ|çingene|"
                 "siyahi|asıllı|kökenli|etnik köken|=zaza$|gürcü|boşnak|arnavut kökenli|pomak|"
                 "kurdish|armenian|ethnic origin",
    "politics": "parti üyesi|partisi üyesi|partili|partiye üye|partisinin|partinin|siyasi partinin|"
                "il başkan yardımcı|ilçe başkan|meclis üyesi|milletvekili aday|aday adayı|delege seçil|ülkücü|"
                "akp'li|chp'li|mhp'li|hdp'li|dem parti|chp'den|akp'den|mhp'den|hdp'den|oy verdi|oy verdim|"
                "oy vereceğim|siyasi görüş|sosyalist|komünist|political views|voted for|party member",
    "union": "sendika üyesi|sendikaya üye|sendikalı|sendika|eğitim-sen|eğitim sen|memur-sen|bank-sen|sağlık-sen|tüm bel-sen|harb-iş|iplik-iş|"
             "petrol-iş|hizmet-iş|birleşik metal|union member|trade union",
    "sexual_life": "eşcinsel|lezbiyen|gay$|biseksüel|transseksüel|trans birey|lgbt|homoseksüel|cinsel yönelim|"
                   "cinsel ilişki|cinsel birliktelik|cinsel hayat|evlilik dışı|birlikte olduk|sevgilisi var|"
                   "homosexual|lesbian|bisexual|sexual orientation",
    "criminal": "sabıka|sabika|adli sicil kaydı|hüküm giy|mahkum|"
                "mahkûm|hükümlü|hapis ceza|hapse gir|hapis yat|cezaevinde|cezaevinden|tutuklan|gözaltına alın|"
                "dolandırıcılıktan|dolandiriciliktan|hırsızlıktan|kasten yaralama|uyuşturucu ticaret|"
                "uyuşturucu madde kullan|denetimli serbestlik|koşullu salıverilme|elektronik kelepçe|tekerrür|"
                "cezalandırılmasına|çarptırıldı|suçundan hüküm|yıl hapis|criminal record|convicted|prison sentence",
    "biometric": "parmak izi|parmak_izi|parmakizi|yüz tanıma|yüz verisi|yüz verim|face_embedding|retina|"
                 "iris tara|ses izi|avuç içi damar|damar izi|biyometrik|fingerprint|face scan|biometric data",
    "genetic": "dna testi|dna test|genetik test|gen testi|geni taşı|geninde|taşıyıcısı|mutasyon|brca|karyotip|"
               "huntington|babalık testi|genetic test",
    "appearance": "başörtü|basörtü|basortu|türban|turban|tesettür|peçeli|çarşafla|çarşaflı|sakal ve takke|"
                  "takke ile|dövmeli|obez$",
    "association": "derneği'ne|derneğine|dernegi'nin|derneği'nin|derneğinin|dernek üye|derneği üye|dayanışma derneği|"
                   "kültür ve dayanışma|vakfın gönüllü|vakfı gönüllü|kulübü üye|kulubu uye|kulübü'ne|rotary|lions kulüb|"
                   "akut'ta gönüllü|gönüllü üye|yönetim kurulu üye|dernek yönetim",
}
_LOOSE = {"ı": "[ıiIİ]", "i": "[iıİI]", "ş": "[şsŞS]", "s": "[sşSŞ]", "ğ": "[ğgĞG]", "ü": "[üuÜU]",
          "ö": "[öoÖO]", "ç": "[çcÇC]", "û": "[ûuÛU]", " ": r"[ \t_]+", "'": "['’]?"}


def loose(term: str, word_end: bool = True) -> str:
    """A term whose Turkish letters also match their dotless / accentless forms; "=" before a
    term keeps its letters exact; "$" after it ends the word there (`word_end`: as a lookahead,
    which RE2's trigger pass cannot run: it gets the term without it, a superset)."""
    end = ""
    if term.endswith("$"):
        term, end = term[:-1], r"(?:['’][^\W\d_]{1,6})?(?!\w)" if word_end else ""
    if term.startswith("="):
        return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in term[1:]) + end
    return "".join(_LOOSE.get(c, re.escape(c)) for c in term) + end


TERM_ALTERNATION = "|".join(loose(t, word_end=False) for v in TERMS.values() for t in v.split("|"))
