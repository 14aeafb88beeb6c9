"""Names in a table's name columns (`policies.detection.persons.columns`): the header says the
cells are names, the cells need only a name's shape."""

from fairgate.policies.detection.persons.columns import find_column_names
from fairgate.policies.detection.triggers import find_triggers
from fairgate.policies.sensitivity import classify


def _names(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_name"]


def test_csv_and_sql_name_columns_hold_names_in_any_casing() -> None:
    csv = "no;ad;soyad;brüt\n3310;nurettin;bakırcı;41200,00\n3311;Ousmane;Sow;39800,00"
    assert _names(csv) == ["nurettin", "bakırcı", "Ousmane", "Sow"]
    sql = "INSERT INTO personel (ad, soyad, tckn) VALUES ('Şeyhmus', 'Acar', '12'), ('Lamin', 'Jallow', '13');"
    assert _names(sql) == ["Şeyhmus", "Acar", "Lamin", "Jallow"]
    assert _names("Üye No;Adı Soyadı;İşyeri\n44120;Bayram Çokgüzel;Ereğli") == ["Bayram Çokgüzel"]


def test_a_lone_name_column_needs_known_names_and_fixtures_are_not_people() -> None:
    md = "| Ad | Rol |\n|---|---|\n| Kadriye Sönmez | lider |\n| Fatou Ndiaye | QA |\n| Anıl Uz | QA |"
    assert _names(md) == ["Kadriye Sönmez", "Fatou Ndiaye", "Anıl Uz"]
    assert _names("kod,ad,fiyat\nK1,Kablosuz Kulaklık,499\nK2,Akıllı Saat,1299") == []
    assert _names("INSERT INTO users (id, name) VALUES (1, 'Deneme Kullanici'), (2, 'Test User');") == []


def test_a_role_before_the_label_names_whose_names_the_column_holds() -> None:
    def cells(text: str) -> list[str]:
        hits, _ = find_triggers(text)
        return [text[s:e] for s, e in find_column_names(text, hits["column"])[0]]

    assert cells("sinif;veli_adi;tel\n3-B;Gönül Tezerdi;-") == ["Gönül Tezerdi"]
    assert cells("urun_kodu,urun_adi,stok\nK-7,Defne Sabunu,12\nK-8,Lale Kolonyası,40") == []
    assert cells("kurs_kodu;kurs_adi;saat\nK1;Ebru Sanatı;12") == []
