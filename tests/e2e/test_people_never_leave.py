"""Issue 33 end to end: people as they are written in real Turkish text — a name alone in a
personal context, a postal address, a KVKK Article 6 special category tied to someone — never
reach an external backend, streamed or not. Checked at that backend: a real recording HTTP
server on loopback behind a real gateway (uvicorn, SQLite), driven by the `openai` SDK.

The sentences are written here by hand (support chats, HR notes, clinic reminders, petitions),
not drawn from the detector's lexicons or the labelled set; a few harmless ones must still go
out, so a gateway that kept everything local would fail too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.gateway.harness import routing_gateway
from tests.helpers.upstream import UpstreamServer

PEOPLE = [
    # a name alone, in a personal context
    "Selam, Berfin Aydoğdu yarın sabah işe gelemeyecekmiş, vardiyasını kim alır?",
    "müşterimiz garbis bey siparişinin iptalini istedi, iadeyi bugün yapalım",
    "Sayın Mahmut Bulut, kargonuz şubemizde bekliyor; kimliğinizle gelip teslim alabilirsiniz.",
    "KOMŞUM ZEYNEP DEMİRCİ'NİN ARABASI YİNE BİZİM GARAJIN ÖNÜNE PARK ETMİŞ",
    "Yeni stajyerimiz Anastasia Petrova ile tanışın, pazartesi muhasebede başlıyor.",
    # a postal address of a person
    "Faturayı şu adrese gönderin: Kemal Özkan, Yeşilyurt köyü Çamlık mevkii No:4, 61830 Maçka/Trabzon",
    "teslimat adresi: Ayşe Sarı, Gazi Osman Paşa sk. 12/3 Çankaya Ankara 06700",
    # special categories tied to a person (by name, by role and place, in the first person)
    "Muhasebedeki Hatice Hanım kemoterapi gördüğü için bu ay yarım gün çalışacak.",
    "3. kattaki satış müdürümüz geçen hafta sendikaya üye oldu, insan kaynakları biliyor mu?",
    "Ben de şeker hastasıyım, insülini öğle yemeğinden önce yapmam gerekiyor, toplantıyı kaydırabilir miyiz?",
    "Ahmet Yılmaz'ın adli sicil kaydında hırsızlıktan mahkumiyet çıktı, işe alımı bekletelim.",
    "Hastamız Rojda Kaya'nın HIV testi pozitif çıktı, kontrol randevusu 14 Mart'ta.",
]
HARMLESS = [
    "Toplantı notlarını maddeler halinde özetler misin?",
    "Kargo firmasının çağrı merkezi 444 0 123, hafta içi 09:00-18:00 arası açık.",
    "Diyabet hastaları öğün atlamamalı; düzenli kan şekeri ölçümü önerilir.",
    "Atatürk 1881'de Selanik'te doğdu ve 1938'de İstanbul'da öldü.",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db: Path = tmp_path_factory.mktemp("people") / "gw.db"
    with contextlib.ExitStack() as es:
        local, ext = es.enter_context(UpstreamServer()), es.enter_context(UpstreamServer())
        gw, admin = es.enter_context(routing_gateway(f"sqlite:///{db}"))
        admin.backend("loc", local.base_url, kind="local", model="up-model")
        admin.backend("ext", ext.base_url, kind="openai", model="up-model")
        rules = [{"match": {"sensitivity": "sensitive"}, "backend": "loc"},
                 {"match": {"sensitivity": "public"}, "backend": "ext"}]
        admin.routes(rules)
        key = admin.key(admin.tenant(name="support")["id"])["key"]
        client = es.enter_context(openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=60))
        yield {"local": local, "ext": ext, "client": client}


def _texts(up: UpstreamServer) -> list[str]:
    return [m["content"] for body in up.received for m in body.get("messages", []) if isinstance(m.get("content"), str)]


@pytest.mark.parametrize("stream", [False, True])
def test_people_stay_local_and_the_harmless_go_out(world: dict[str, Any], stream: bool) -> None:
    client = world["client"]
    for text in PEOPLE + HARMLESS:
        messages = [{"role": "user", "content": text}]
        if stream:
            chunks = list(client.chat.completions.create(model="chat", messages=messages, max_tokens=4, stream=True))
            assert chunks
        else:
            assert client.chat.completions.create(model="chat", messages=messages, max_tokens=4).choices
    external, local = _texts(world["ext"]), _texts(world["local"])
    assert [t for t in PEOPLE if t in external] == []
    assert all(t in local for t in PEOPLE)
    assert all(t in external for t in HARMLESS)
