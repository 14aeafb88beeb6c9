"""Sentence frames for the tagger's training set, by genre. Slots: {P} a person (the label),
{P1} a person by given name only, {PL} a place, {ORG} an organisation, {ST} a street or a
building named after someone, {H} a historical or public figure (not personal data in general
text), {W} a capitalised common word, {N} a number, {D} a date, {SG} "SURNAME/GIVEN MR"
(airline style), {BRAND} a name or word followed by a company's or product's words,
{FAKE} a placeholder name from test fixtures."""

from __future__ import annotations

PERSON_FRAMES = [
    # support e-mails and chats
    "Merhaba, ben {P}. {D} tarihli siparişim hâlâ gelmedi.",
    "Fatura adı {P} olmalı, sistemde yanlış görünüyor.",
    "Müşteri: adım {P}, sipariş numaram {N}",
    "Temsilci: Teşekkürler {P1} Hanım, kontrol ediyorum.",
    "Teşekkürler {P1} Bey, talebinizi aldık.",
    "Sayın {P}, {D} tarihli randevunuz onaylanmıştır.",
    "Sayın {P}, başvurunuz değerlendirmeye alınmıştır.",
    "İyi günler {P1} Hanım, kargonuz yola çıktı.",
    "Saygılarımla,\n{P}",
    "Kolay gelsin,\n{P}\n{PL} şubesi",
    "Bu konuda {P} ile görüşmenizi rica ederim.",
    "{P} aradı, sizinle konuşmak istiyor.",
    "{P} bugün izinli, yarın dönecek.",
    "Dosyayı {P}'e iletir misin?",
    "Toplantıya {P} ve {P} katılacak.",
    "Katılımcılar: {P} (Satış), {P} (Finans), {P} (İK)",
    "Hazırlayan: {P}  Onaylayan: {P}",
    "Ad Soyad: {P}\nTel: {N}",
    "ad_soyad;{P};{N}",
    "{N},{P},{PL},{N}",
    '{{"customer": {{"name": "{P}", "city": "{PL}"}}}}',
    "INSERT INTO musteri (ad, sehir) VALUES ('{P}', '{PL}');",
    "user={P} action=login status=ok",
    'ad="{P}" personel_id={N}',
    # relations and roles
    "Komşum {P} dün hastaneye kaldırıldı.",
    "Eşim {P1} bu akşam gelemeyecek.",
    "Hastamız {P} kontrole çağrıldı.",
    "Çalışanımız {P} bu ay yıllık izinde.",
    "Öğrencimiz {P} derse gelmedi.",
    "Kiracı: {P}, TCKN {N}",
    "Borçlu: {P}\nAdres: {PL}",
    "DAVACI: {P}\nDAVALI: {P}",
    "Sanık {P}'ın savunması alındı.",
    "Tanık {P} duruşmaya katılmadı.",
    "Sigortalı: {P}\nPoliçe No: {N}",
    "Hasta: {P}, {N} yaşında",
    "Alıcı: {P} / {PL}",
    "Gönderen: {P}",
    "Aday {P}'in mülakatı perşembe.",
    "Danışan {P} ({N}) seansa geldi.",
    "Veli: {P}, öğrenci: {P}",
    "Dr. {P} nöbette, acil hastalar ona yönlendirilsin.",
    "Av. {P} vekaletnameyi sundu.",
    "Prof. Dr. {P} kongrede konuşacak.",
    "Öğretmen {P1} veli toplantısı yapacak.",
    "Hemşire {P1} ilaçları dağıttı.",
    "{P1} teyze yarın bizde kalacak.",
    "{P1} abi aradı, akşam uğrayacakmış.",
    "Oğlum {P1} okuldan erken çıktı.",
    "Kızım {P1}'i okuldan alabilir misin?",
    "Annem {P1} Hanım'ın ameliyatı yarın.",
    "{P1}'la konuştum, yarın geliyor.",
    "{P1}'ı hastaneye götürüyorum, işe gelemem.",
    "Arkadaşım {P} seninle tanışmak istiyor.",
    "{P} ile {P} aynı ekipte çalışıyor.",
    "{PL}'da {N} yaşındaki {P}, gözaltına alındı.",
    "Kadının adı {P1}, kızın adı {P1}.",
    "Nöbetçi: {P} ({N})",
    "Hafta 2: {P1} Hanım, dahili {N}",
    "Resepsiyondaki {P}'ın vardiyası değişti.",
    "Muhasebedeki {P1} Bey raporu gönderdi.",
    "{P}, {PL} fabrikası, dokuma",
    "{N}. {P} – {PL}",
    "Kiraya veren: {P}\nKiracı: {P}",
    "Refakatçi: oğlu {P1} ({N})",
    "Check-in: {P}, oda {N}, 3 gece.",
    "Mülakat notu: Aday ({P}) teknik sorulara iyi cevap verdi.",
    "{P} isimli müşterimiz şikayette bulundu.",
    "{P} adlı personelin sözleşmesi yenilendi.",
    "Yeni işe başlayan {P} depo sorumlusu oldu.",
    "{P}'nin dosyası eksik, lütfen tamamlayın.",
    "{P}'dan gelen dilekçe ektedir.",
    "{P}'a ait hesap kapatıldı.",
    "Ben {P}'un annesiyim.",
    "Hocam merhaba, ben {P}'un velisiyim.",
    "Sevgili ekip, {P1} bu hafta yok, işlerine {P1} bakacak.",
    "{P1} Hanım'a iletildi.",
    "{P1} Bey'e teşekkürler.",
    "{P} (muhasebe) bu ay ayrılıyor.",
    "Performans Değerlendirmesi – {P} (Satış Temsilcisi)",
    "Hesap sahibi {P}, IBAN ekte.",
    "card_holder: {P}",
    "alici {P}, aciklamaya daire {N} yazin",
    "ilginize teşekkürler, {P1}",
    "kolay gelsin, {P1}",
    "saygılar\n{P1}",
    "mumları sen yak benim yerime {P1}",
    "komşunun oğlu {P1} hapisten çıktı",
    "Sayın velimiz, kızınız {P1}'un okula gelmediğini gördük.",
    "Sevgili velimiz, oğlunuz {P1}'ın raporu ulaştı.",
    "Gerekçe olarak oğlum {P1}'in durumunu yazdım.",
    "Yeni başlayan arkadaşımız {P}'ın evrakı eksik.",
    "Bu hafta gelemiyorum, {P1}'a söyler misin?",
    "Çağrı merkezinde çalışan {P1}'in vardiyası değişti.",
    "Bugün teneffüste {P1} ve {P1} kavga etti.",
    "Öğleden sonraki siparişleri {P1} götürecek.",
    "Projelerini {P1} devralıyor.",
    "Siparişi {P1} yerine kardeşi {P1} teslim alacak.",
    "Misafirimiz Bay {P1} yarın geliyor.",
    "{P1} tekrar aradı, modem hâlâ çalışmıyor.",
    "Kasadaki çocuk {P1} bize yanlış para üstü verdi.",
    "annemin kızlık soyadı da {P1}",
    "{P},{N},{W},{PL}",
    "{N};{P};{N};{PL}",
    '{{"name": "{SG}", "passport": "{N}"}}',
    'holder="{P}" reason=CVV_MISMATCH',
    "AD: {P1}\nSOYAD: {P1}",
    "Hafta 1: {P} ({N})",
    "{P1} Hanım – dahili {N}",
    "Hasta adı: {P}\nDoğum yeri: {PL}",
    "Teslim alan: {P}\nTeslim yeri: {PL}",
    # a person before their address, the way a cargo label or a petition's header gives both
    "{P}, {PL} mahallesi {N}. sokak no {N} {PL}/{PL}",
    "{P}, {PL} köyü No {N} {PL}/{PL}",
    "{P} - {ST} No:{N} D:{N} {PL}",
    "Sayın {P}'dan bir mesaj geldi, yarın dönüş yapalım.",
]

NEGATIVE_FRAMES = [
    "{PL}'da etkili olan yağış nedeniyle yollar kapandı.",
    "{ORG} yeni şubesini {PL}'da açtı.",
    "{ORG} hisseleri bugün yüzde {N} yükseldi.",
    "Ürünü {ORG}'ten aldık, kargo {N} günde geldi.",
    "{ST} üzerinde yol çalışması var.",
    "Adres: {ST} No:{N} {PL}",
    "{H} ({N}–{N}), Osmanlı döneminin önemli isimlerindendir.",
    "{H}, {PL}'da doğmuş ve eserlerini burada vermiştir.",
    "{H}'in hayatı okullarda anlatılır.",
    "{H} adını taşıyan {ORG} bu yıl yenilendi.",
    "{W} sezonu {PL}'da başladı.",
    "{W} günü ofis kapalı olacak.",
    "{W} ayında bütçe revizyonu yapılacak.",
    "{W} toplantısı {N}:00'de başlayacak.",
    "Toplantı {W} günü saat {N}'da.",
    "{PL} ve {PL}'tan katılımcılar geldi.",
    "{ORG} müşteri hizmetleri hattı: {N}",
    "Vergi Dairesi: {PL} VD, VKN: {N}",
    "Satıcı: {ORG}\nToplam: {N} TL",
    "ALICI: {ORG}\nFATURA TARİHİ: {D}",
    "{ORG} ile {ORG} arasında anlaşma imzalandı.",
    "Sürüm {N}: {W} modülü güncellendi.",
    "{W} enerjisi yatırımları artıyor.",
    "Lütfen {W} formunu doldurup {ORG}'ne iletin.",
    "{PL} Büyükşehir Belediyesi ekipleri gece boyunca çalıştı.",
    "{ST}'nde trafik yoğun.",
    "{PL} şubemiz hafta içi 09:00-18:00 açıktır.",
    "Kargo {PL} aktarma merkezinde bekliyor.",
    "{W} ve {W} için yeni fiyat listesi ekte.",
    "Model: {W}-{N}, yazılım sürümü v{N}.",
    "{H} döneminde {PL} önemli bir ticaret merkeziydi.",
    "{PL} Irmağı'nın kenarında kamp yaptık.",
    "{W} Parkı'nda konser verildi.",
    "{PL}'dan gelen arkadaşlar {PL}'a geçmeden burada kaldı.",
    "Rota: {PL} – {PL} – {PL} – {PL}.",
    "Hava durumu: yarın {PL} ve {PL}'de sağanak bekleniyor.",
    "{PL}'in {PL} ilçesinde yeni okul açıldı.",
    "DOĞUM YERİ: {PL}\nTESLİM YERİ: {PL} BÖLGE DEPO",
    "Yeni adresim: {PL}, {N} sokak, {PL}",
    "{BRAND} ürünü indirimde.",
    "{BRAND} ile anlaşma yapıldı.",
    "Satıcı: {BRAND}\nTutar: {N} TL",
    "Davacı {BRAND} ile davalı {BRAND} arasındaki dava",
    "{H} ve {H} döneminde {PL} büyüdü.",
    "Annesi {H}, babası {H}'dir.",
    "Gerçek adı {H}'dir; {PL}'de doğdu.",
    "Örnek veri: {{\"ad\": \"{FAKE}\", \"tckn\": \"{N}\"}}",
    "INSERT INTO users VALUES (1,'{FAKE}','test@example.com');",
    "{W} Savaşı'nı başlattı.",
    "{PL} {N}. Asliye Hukuk Mahkemesi'nde görülecek.",
    "Türk-İş ve Hak-İş kutlamaları {PL}'da yaptı.",
    # a field's label that a lexicon also lists as a given name ("Dönüş: 21.03.2025")
    "Kayıt notu\n{W}: {D}, {PL}",
    "{W}: {D}\n{W}: {D}",
    # a thing's name after its owner's "adı" ("projenin adı Zephyr")
    "Projenin adı {W}.",
    "Yeni kampanyanın adı {W}, {D} tarihinde başlıyor.",
]

BRAND_TAILS = ("Kahvaltı Evi|Tekno|Kimya A.Ş.|Perakende A.Ş.|Enerji A.Ş.|İnşaat Ltd. Şti.|Market|Gıda|"
               "Mobilya|Otomotiv|Tekstil San. Tic. A.Ş.|Lojistik|Yapı|Eczanesi|Kuyumculuk|Kırtasiye|"
               "Türk kahvesi|kuru kayısı|Holding|Grup|Eğitim Kurumları|Sağlık Hizmetleri|"
               # a compound's head: a shop, a dance or a song named after someone ("Esmeralda pastanesi")
               "pastanesi|büfesi|kebapçısı|dansı|türküsü").split("|")
FAKE_NAMES = ("Ali Veli|Ayşe Örnek|Mehmet Deneme|Test Kullanıcı|Örnek Kişi|Deneme Hesabı|Ahmet Test|"
              "John Doe|Jane Doe|Ad Soyad|İsim Soyisim").split("|")

WORDS = ("Ocak Şubat Mart Nisan Mayıs Haziran Temmuz Ağustos Eylül Ekim Kasım Aralık Pazartesi Salı "
         "Çarşamba Perşembe Cuma Cumartesi Pazar Güneş Deniz Umut Barış Yıldız Kaya Demir Bahar Yaz Kış "
         "Bayram Ramazan Kurban Sevgi Hayat Çiçek Toprak Ceylan Doğan Kartal Aslan Bulut Tatil Rapor "
         "Fatura Sipariş Kargo Müşteri Toplantı Proje Bütçe Ürün Garanti Kampanya İndirim Güvenlik Sistem "
         "Yazılım Servis Destek Yönetim Kurul Genel Merkez Şube Bölge Satış Finans Muhasebe Lojistik Depo "
         "Altın Gümüş Elmas Zümrüt İnci Lale Gül Nergis Papatya Zeytin Fındık Çay Kahve Simit Baklava "
         "Gidiş Dönüş Varış Giriş Çıkış").split()
ORGS = ("Türk Telekom|Turkcell|Vodafone|Garanti BBVA|Yapı Kredi|Akbank|İş Bankası|Ziraat Bankası|Halkbank|"
        "Koç Holding|Sabancı Holding|Arçelik|Vestel|Migros|BİM|A101|Trendyol|Hepsiburada|Getir|Yemeksepeti|"
        "Türk Hava Yolları|Pegasus|Aras Kargo|Yurtiçi Kargo|MNG Kargo|PTT|Kuzey Yapı Malzemeleri A.Ş.|"
        "Anadolu Gıda Ltd. Şti.|Demir Lojistik A.Ş.|Kaya Yapı Market|Yıldız Holding|Ülker|Eti|Doğan Holding|"
        "Çelik Metal San. Tic. Ltd. Şti.|Güneş Sigorta|Aslan Çimento|Deniz Bank|Demirdöküm|Ford Otosan|"
        "Tofaş|Aselsan|Şişecam|Enerjisa|İGDAŞ|BEDAŞ|SGK|Vergi İletişim Merkezi|Adalet Bakanlığı|"
        "Kadıköy Belediyesi|Acıbadem Hastanesi|Hacettepe Üniversitesi|Boğaziçi Üniversitesi|AFAD|Kızılay|"
        "Yıldız Teknik Üniversitesi|Mimar Sinan Güzel Sanatlar Üniversitesi|Karadenizliler Derneği").split("|")
HISTORICAL = ("Atatürk|Mustafa Kemal Atatürk|İsmet İnönü|Fatih Sultan Mehmet|Kanuni Sultan Süleyman|Mimar Sinan|"
              "Nazım Hikmet|Yunus Emre|Mevlana|Hacı Bektaş Veli|Sabiha Gökçen|Evliya Çelebi|Piri Reis|"
              "Yavuz Sultan Selim|Orhan Gazi|Osman Gazi|Karacaoğlan|Aşık Veysel|Namık Kemal|Ziya Gökalp|"
              "Mehmet Akif Ersoy|Halide Edib Adıvar|Sait Faik Abasıyanık|Orhan Pamuk|Yaşar Kemal|Barış Manço|"
              "Zeki Müren|Cahit Arf|Aziz Sancar|Fevzi Çakmak|Kazım Karabekir|Abdülhamid|Cem Sultan|"
              "Mimar Kemaleddin|Kemal Sunal|Adile Naşit|Sezen Aksu|Tarkan|Naim Süleymanoğlu").split("|")
STREETS = ("Atatürk Caddesi|İnönü Bulvarı|Fevzi Çakmak Mahallesi|Cumhuriyet Mahallesi|Fatih Sultan Mehmet "
           "Köprüsü|Sabiha Gökçen Havalimanı|Bağdat Caddesi|İstiklal Caddesi|Barbaros Bulvarı|Kazım "
           "Karabekir Caddesi|Yunus Emre Mahallesi|Mimar Sinan Mahallesi|Hürriyet Caddesi|Gazi Mustafa Kemal "
           "Bulvarı|Nazım Hikmet Kültür Merkezi|Fahrettin Kerim Gökay Caddesi|Refah Şehitleri Caddesi").split("|")
