"""A request's prefix key: the hash of its first prompt blocks, salted as the engine salts.

The engine hashes full KV blocks as `sha256_block_hash(parent, tokens, extra)` with `extra`
"s:<cache salt>" (or "t:<tenant>" without a salt; backends/local/kv_cache/block_manager.py). The pool
computes the same chain over the first `blocks` full blocks of the prompt, so two requests get
the same key exactly when the engine could serve the second from the first's cache, and one
tenant's key never equals another's. With a tokenizer (the pool's model folder) the blocks are
token ids, as in the engine; without one (an upstream whose tokenizer the gateway lacks, e.g.
vLLM serving a model we do not hold) they are UTF-8 bytes of the prompt text, `block_size` × 4
bytes each: the same shared text still maps to the same key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fairgate.backends.local.kv_cache.block_pool import sha256_block_hash

if TYPE_CHECKING:
    from fairgate.backends.base import GenerationRequest

BYTES_PER_TOKEN = 4  # byte fallback: a block of text about as long as a block of tokens


class PromptEncoder(Protocol):
    """The pool's model tokenizer: encodes prompts into the key's blocks, and decodes token ids for
    the gateway (the pool's `token_decoder`, so a `backends.base.TokenDecoder` too)."""

    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_chat(self, messages: list[dict[str, Any]]) -> list[int]: ...
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...


def cache_extra(request: GenerationRequest) -> str:
    """The engine's `extra` for this request (block_manager._extra)."""
    return "s:" + request.cache_salt if request.cache_salt is not None else "t:" + request.tenant


class PrefixKeyer:
    """`key(request)` → bytes; the chained hash of the first `blocks` full blocks (or of
    the salt alone for a prompt shorter than one block: the tenant's own home)."""

    def __init__(self, tokenizer: PromptEncoder | None = None, block_size: int = 16, blocks: int = 4) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.blocks = blocks

    def key(self, request: GenerationRequest) -> bytes:
        extra = cache_extra(request)
        try:
            ids, tokens = self._units(request)
        except Exception:  # noqa: BLE001 - a prompt the engine will refuse: any replica refuses it
            ids, tokens = [], True
        size = self.block_size if tokens else self.block_size * BYTES_PER_TOKEN
        parent: bytes | None = None
        for i in range(min(self.blocks, len(ids) // size)):
            parent = sha256_block_hash(parent, tuple(ids[i * size:(i + 1) * size]), extra)
        return parent if parent is not None else sha256_block_hash(None, (), extra)

    def _units(self, request: GenerationRequest) -> tuple[list[int], bool]:
        """The prompt as token ids (True) or, without a tokenizer, as text bytes (False)."""
        wire = request.wire
        tok = self.tokenizer
        if request.kind == "chat":
            messages = [{"role": m.get("role"), "content": _text(m.get("content"))} for m in wire.messages]
            if tok is not None:
                return tok.encode_chat(messages), True
            return list("\n".join(f"{m['role']}:{m['content']}" for m in messages).encode()), False
        prompt = wire.prompt
        if isinstance(prompt, list):
            return list(prompt), True  # token ids already: the engine hashes exactly these
        text = prompt if isinstance(prompt, str) else ""
        return (tok.encode(text), True) if tok is not None else (list(text.encode()), False)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
