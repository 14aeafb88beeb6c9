"""Text <-> token ids for a model folder: tokenizer.json via `tokenizers`, chat template via jinja2.

The chat template comes from `chat_template.jinja` or tokenizer_config.json `chat_template` and
renders in a sandboxed jinja environment set up as transformers sets up its own: the same inputs
(messages, add_generation_prompt, bos_token, eos_token, tools, raise_exception, strftime_now),
`{% break %}` / `{% continue %}` (jinja's loopcontrols), and the `{% generation %}` block (which
transformers uses to mark assistant tokens; it renders its body unchanged).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as _HFTokenizer


class ChatTemplateError(ValueError):
    """Messages cannot be rendered: no template, or the template rejected them."""


def _token_str(value: Any) -> str | None:
    """tokenizer_config stores special tokens as a string or an AddedToken dict."""
    token: str | None = value.get("content") if isinstance(value, dict) else value
    return token


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers' assistant-mask marker; the text
    between the tags renders as is."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


class Tokenizer:
    """One model folder's tokenizer. Thread-safe for encode/decode (tokenizers is)."""

    def __init__(self, model_dir: str | Path) -> None:
        model_dir = Path(model_dir)
        tok_file = model_dir / "tokenizer.json"
        if not tok_file.is_file():
            raise FileNotFoundError(f"no tokenizer.json in {model_dir}")
        self._tok = _HFTokenizer.from_file(str(tok_file))
        cfg_file = model_dir / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text(encoding="utf-8")) if cfg_file.is_file() else {}
        self.bos_token = _token_str(cfg.get("bos_token"))
        self.eos_token = _token_str(cfg.get("eos_token"))
        self.bos_token_id = self._tok.token_to_id(self.bos_token) if self.bos_token else None
        self.eos_token_id = self._tok.token_to_id(self.eos_token) if self.eos_token else None
        self.chat_template = self._find_template(model_dir, cfg)
        self._compiled: jinja2.Template | None = None

    @staticmethod
    def _find_template(model_dir: Path, cfg: dict[str, Any]) -> str | None:
        jinja_file = model_dir / "chat_template.jinja"
        if jinja_file.is_file():  # newer transformers save it beside the config; it wins
            return jinja_file.read_text(encoding="utf-8")
        template = cfg.get("chat_template")
        if isinstance(template, list):  # named templates: take "default"
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("default")
        return template or None

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def to_json(self) -> str:
        """tokenizer.json as text (grammar engines read its vocabulary type from it)."""
        return self._tok.to_str()

    def get_vocab(self) -> dict[str, int]:
        """Token string (in the tokenizer's own encoding, e.g. byte-level) -> id."""
        return self._tok.get_vocab(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """Render messages to the prompt text; ChatTemplateError if impossible."""
        if self.chat_template is None:
            raise ChatTemplateError(
                "this model has no chat template (tokenizer_config.json chat_template or "
                "chat_template.jinja); use the completions endpoint with a plain prompt"
            )
        if self._compiled is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[jinja2.ext.loopcontrols, _GenerationTag])
            env.globals["raise_exception"] = _raise_exception
            env.globals["strftime_now"] = _strftime_now
            env.filters["tojson"] = _tojson
            try:
                self._compiled = env.from_string(self.chat_template)
            except jinja2.TemplateError as exc:
                raise ChatTemplateError(f"chat template does not compile: {exc}") from None
        try:
            return self._compiled.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                tools=tools,
                bos_token=self.bos_token or "",
                eos_token=self.eos_token or "",
                **kwargs,
            )
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"chat template rejected the messages: {exc}") from None

    def encode_chat(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any) -> list[int]:
        """Rendered template -> ids. No extra BOS: templates carry their own, as in transformers."""
        text = self.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, **kwargs)
        return self.encode(text, add_special_tokens=False)

    def detokenizer(self, prompt_ids: list[int] | None = None, skip_special_tokens: bool = True) -> IncrementalDetokenizer:
        return IncrementalDetokenizer(self, prompt_ids, skip_special_tokens)


class IncrementalDetokenizer:
    """Turns a growing list of output ids into text pieces, never splitting a UTF-8 character.

    Each step decodes a short window ending at the newest token and emits only what the window
    adds over its previous text; a trailing U+FFFD means a character is still incomplete, so it
    waits. A few prompt ids seed the window so tokenizers that drop a leading space on the first
    token (SentencePiece) still get it right.
    """

    _CONTEXT = 5

    def __init__(self, tokenizer: Tokenizer, prompt_ids: list[int] | None, skip_special_tokens: bool) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = list(prompt_ids[-self._CONTEXT :]) if prompt_ids else []
        self._prefix_offset = 0
        self._read_offset = len(self._ids)
        self.text = ""

    def add(self, token_id: int) -> str:
        """Append one generated id; return the newly complete text (maybe "")."""
        self._ids.append(token_id)
        prefix = self._tok.decode(self._ids[self._prefix_offset : self._read_offset], self._skip)
        full = self._tok.decode(self._ids[self._prefix_offset :], self._skip)
        if len(full) <= len(prefix) or full.endswith("\ufffd"):
            return ""
        piece = full[len(prefix) :]
        self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        self.text += piece
        return piece

    def flush(self) -> str:
        """At the end of a sequence: whatever is still held back (e.g. a lone U+FFFD)."""
        prefix = self._tok.decode(self._ids[self._prefix_offset : self._read_offset], self._skip)
        full = self._tok.decode(self._ids[self._prefix_offset :], self._skip)
        piece = full[len(prefix) :] if len(full) > len(prefix) else ""
        self._prefix_offset = self._read_offset = len(self._ids)
        self.text += piece
        return piece
