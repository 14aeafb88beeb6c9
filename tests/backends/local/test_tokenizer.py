"""Tokenizer wrapper against transformers' own tokenizer on the same folder."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from fairgate.backends.local.model.tokenizer import ChatTemplateError, Tokenizer

transformers = pytest.importorskip("transformers")

TEXTS = [
    "Merhaba dünya! Çok güzel bir gün, ağaçlar çiçek açtı; şeker, ılık süt, İstanbul.",
    "Emoji: 😀🎉🚀 and ₺100 — “quotes”… ß é ü ö ç ğ ı ş",
    "plain ascii, numbers 0 1 2 42 and code: def add(a, b): return a + b",
]
MESSAGES = [
    {"role": "system", "content": "Sen yardımsever bir asistansın."},
    {"role": "user", "content": "Merhaba 😀"},
    {"role": "assistant", "content": "Merhaba! Nasıl yardımcı olabilirim?"},
    {"role": "user", "content": "Bugün hava nasıl?"},
]


@pytest.fixture(scope="module")
def tok(tiny_model_dir) -> Tokenizer:
    return Tokenizer(tiny_model_dir)


@pytest.fixture(scope="module")
def hf_tok(tiny_model_dir):
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize("text", TEXTS)
def test_encode_decode_match_transformers(tok, hf_tok, text):
    assert tok.encode(text) == hf_tok(text).input_ids
    assert tok.encode(text)[0] == tok.bos_token_id
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("text", TEXTS)
def test_incremental_detokenizer_equals_full_decode(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    detok = tok.detokenizer(prompt_ids=tok.encode("Önce:"))
    pieces = [detok.add(i) for i in ids]
    pieces.append(detok.flush())
    assert "".join(pieces) == tok.decode(ids) == text
    assert not any("\ufffd" in p for p in pieces)  # never half a character
    assert "" in pieces or text.isascii()  # multi-byte chars really were held back


def test_incremental_detokenizer_random_ids(tok):
    rng = random.Random(0)
    ids = [rng.randrange(3, tok.vocab_size) for _ in range(300)]
    detok = tok.detokenizer()
    text = "".join(detok.add(i) for i in ids) + detok.flush()
    assert text == tok.decode(ids)


def test_chat_template_matches_transformers(tok, hf_tok):
    ours = tok.apply_chat_template(MESSAGES, add_generation_prompt=True)
    theirs = hf_tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert ours == theirs
    assert ours.startswith("<s><|system|>\n") and ours.endswith("<|assistant|>\n")
    assert tok.encode_chat(MESSAGES) == hf_tok.apply_chat_template(
        MESSAGES, tokenize=True, add_generation_prompt=True, return_dict=True
    )["input_ids"]
    assert tok.encode_chat(MESSAGES).count(tok.bos_token_id) == 1


def test_template_raise_exception_is_a_chat_template_error(tok):
    with pytest.raises(ChatTemplateError, match="unknown role: wizard"):
        tok.apply_chat_template([{"role": "wizard", "content": "x"}])


def test_missing_template_is_a_clear_error(tiny_model_dir, tmp_path):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, tmp_path / name)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del cfg["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = Tokenizer(tmp_path)
    assert tok.encode("hi")[0] == tok.bos_token_id  # plain prompts still work
    with pytest.raises(ChatTemplateError, match="no chat template"):
        tok.encode_chat(MESSAGES)
    # chat_template.jinja beside the config is found (newer transformers save it there)
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    assert Tokenizer(tmp_path).apply_chat_template(MESSAGES[:2]) == "[Sen yardımsever bir asistansın.][Merhaba 😀]"


def test_template_sandbox_blocks_attribute_escape(tiny_model_dir, tmp_path):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, tmp_path / name)
    (tmp_path / "chat_template.jinja").write_text("{{ messages.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(ChatTemplateError):
        Tokenizer(tmp_path).apply_chat_template(MESSAGES)
