"""A real Hugging Face model folder whose greedy output is known in advance, for tests of what the
server does with an output (reasoning parsers) rather than of the model's numbers.

A Llama whose attention and MLP outputs are zero (o_proj and down_proj all zeros) leaves each
position's hidden state at its token's embedding, so the next token depends on the current token
alone: the LM head's row for token `b` is the embedding of `a` (scaled), which makes `b` the argmax
after `a`. `successors` {a: b} is such a chain; everything else is random. The tokenizer is the
tiny byte-level BPE of tiny_models.py with Qwen3's added tokens and its chat template
(tests/fixtures/qwen3_chat_template.jinja), so prompts render as a Qwen3 model's do; or, with
`harmony=True`, gpt-oss's harmony markers (special tokens, as in its tokenizer) and a template
that ends the prompt with "<|start|>assistant", as gpt-oss's does.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.tiny_models import tokenizer_json

QWEN3_TEMPLATE = (Path(__file__).resolve().parents[1] / "fixtures" / "qwen3_chat_template.jinja").read_text()
IM_START, IM_END, THINK, END_THINK, PARAGRAPH = "<|im_start|>", "<|im_end|>", "<think>", "</think>", "\n\n"
# gpt-oss's harmony markers, and its channel and role names as single tokens. A scripted token has
# one successor, so a header the output repeats cannot open it twice: FIRST_HEADER is the first
# message's header as one token (decoded to the same text)
H_START, H_CHANNEL, H_MESSAGE, H_END, H_RETURN = "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"
FIRST_HEADER = "<|channel|>analysis<|message|>"
HARMONY_TEMPLATE = ("{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
                    "{% if add_generation_prompt %}<|start|>assistant{% endif %}")


def qwen3_tokenizer() -> str:
    """tokenizer.json: the tiny BPE plus Qwen3's chat tokens (special) and thinking tags (not
    special: decoding keeps them, as Qwen3's does), and "\\n\\n" as one token."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(tokenizer_json())
    tok.post_processor = None  # Qwen3 adds no BOS
    tok.add_special_tokens([AddedToken(IM_START, special=True), AddedToken(IM_END, special=True)])
    tok.add_tokens([AddedToken(THINK, special=False, normalized=False),
                    AddedToken(END_THINK, special=False, normalized=False),
                    AddedToken(PARAGRAPH, special=False, normalized=False)])
    return tok.to_str()


def harmony_tokenizer() -> str:
    """tokenizer.json: the tiny BPE plus gpt-oss's harmony markers (special: decoding skips them
    unless asked not to) and its channel and role names."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(tokenizer_json())
    tok.post_processor = None
    tok.add_special_tokens([AddedToken(t, special=True) for t in (H_START, H_CHANNEL, H_MESSAGE, H_END, H_RETURN,
                                                                  FIRST_HEADER)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("assistant", "analysis", "final")])
    return tok.to_str()


def make_scripted_model(path: Path, successors: dict[str, str], seed: int = 0, harmony: bool = False) -> Path:
    """The folder, greedy-decoding along `successors` (token text -> next token text; each text
    must be one token of qwen3_tokenizer(), or of harmony_tokenizer() with `harmony`). `IM_END`
    (harmony: `H_RETURN`) ends generation."""
    import torch
    from tokenizers import Tokenizer
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    path.mkdir(parents=True, exist_ok=True)
    tok_json = harmony_tokenizer() if harmony else qwen3_tokenizer()
    tok = Tokenizer.from_str(tok_json)
    ids = {text: _one_token(tok, text) for pair in successors.items() for text in pair}
    end = H_RETURN if harmony else IM_END
    eos = tok.token_to_id(end)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=eos, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        emb.normal_(0.0, 1.0)
        head = model.lm_head.weight
        head.normal_(0.0, 0.02)
        for a, b in successors.items():
            head[ids[b]] = emb[ids[a]] * 4.0
    model.save_pretrained(path, safe_serialization=True)
    GenerationConfig(eos_token_id=eos, do_sample=False).save_pretrained(path)
    (path / "tokenizer.json").write_text(tok_json, encoding="utf-8")
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": end, "pad_token": end, "add_bos_token": False,
        "model_max_length": 512, "chat_template": HARMONY_TEMPLATE if harmony else QWEN3_TEMPLATE}, indent=2),
        encoding="utf-8")
    return path


def _one_token(tok: object, text: str) -> int:
    got = tok.encode(text, add_special_tokens=False).ids  # type: ignore[attr-defined]
    if len(got) != 1:
        raise ValueError(f"{text!r} is {len(got)} tokens in the scripted tokenizer, not one")
    return int(got[0])
