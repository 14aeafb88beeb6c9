"""Real, tiny Hugging Face model folders for tests.

`make_tiny_model` writes what a hub download would hold: config.json, model.safetensors
(transformers `save_pretrained`, random weights from a fixed seed, fp32), a byte-level BPE
tokenizer.json trained on a small built-in English + Turkish text, tokenizer_config.json with a
jinja chat template, and generation_config.json. Same arguments -> same bytes, in any process.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

# The demo model's special tokens and chat template, so tests exercise what the project ships
# (unknown roles hit raise_exception: tests check the sandboxed error path).
from tools.demo_model.tokenizer import BOS, CHAT_TEMPLATE, EOS, PAD

_CORPUS = """\
The quick brown fox jumps over the lazy dog. A gateway sends each request to the right model.
Every tenant has a quota, a priority class and a budget for tokens per day and per month.
The engine keeps the key and value cache in blocks of sixteen tokens and shares full blocks.
Hello world! How are you today? I am fine, thank you. What is the weather like in Istanbul?
It is sunny and warm, with a light wind from the sea. Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 2024.
Bugün hava çok güzel, İstanbul'da güneş parlıyor ve deniz sakin görünüyor.
Kişisel verilerin korunması kanunu, şirketlerin verileri kendi sunucularında tutmasını ister.
Çocuklar bahçede oynuyor; öğretmen ödevleri kontrol ediyor ve öğrenciler şarkı söylüyor.
Günaydın! Nasılsınız? Teşekkür ederim, iyiyim. Şu an saat kaç? Öğle yemeğinde ne yiyeceğiz?
Ağaçların yaprakları sonbaharda sararır, kışın kar yağar ve ilkbaharda çiçekler açar.
Müşteri hizmetleri her gün dokuzdan altıya kadar açıktır; lütfen sıranızı bekleyiniz.
def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i, add(i, 1))\n
{"role": "user", "content": "Merhaba, bana yardım eder misin?"} -> {"role": "assistant"}
Emoji and symbols: 😀 🎉 🚀 ✓ € ₺ ß é ü ö ç ğ ı ş — “quoted” text… and more text here.
"""


@functools.lru_cache(maxsize=4)
def tokenizer_json(vocab_size: int = 512) -> str:
    """Train (once per process) a deterministic byte-level BPE; return its tokenizer.json text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeating lines with different weights gives the merges a stable frequency order.
    lines = _CORPUS.splitlines()
    tok.train_from_iterator([line for i, line in enumerate(lines) for _ in range(1 + i % 3)], trainer)
    bos_id = tok.token_to_id(BOS)
    # Llama-style: plain encode() prepends BOS; chat prompts carry it via the template instead.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tok.to_str()


def _arch_config(arch: str, vocab_size: int, bos_id: int, eos_id: int, overrides: dict[str, Any]):
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        # Wider than the HF default so random logits have clear argmax gaps (stable greedy tests).
        initializer_range=0.15,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        tie_word_embeddings=False,
    )
    if arch == "llama":
        cls = LlamaConfig
    elif arch == "mistral":
        cls, common["sliding_window"] = MistralConfig, None
    elif arch == "qwen2":
        cls, common["tie_word_embeddings"] = Qwen2Config, True  # like Qwen2-0.5B
    elif arch == "qwen3":
        # like Qwen3-0.6B: tied embeddings, no attention bias, per-head q/k norms, and a head_dim
        # (32) that is not hidden / heads (16)
        cls, common["tie_word_embeddings"], common["head_dim"] = Qwen3Config, True, 32
        common["attention_bias"] = False
    elif arch == "gemma3":
        # like Gemma 3 1B in miniature: tied embeddings, head_dim 32 != hidden / heads, a query
        # scale of its own, sliding layers (window 8) around a full one with their own RoPE base
        cls, common["tie_word_embeddings"], common["head_dim"] = Gemma3TextConfig, True, 32
        common.update(num_hidden_layers=4, sliding_window=8, query_pre_attn_scalar=24, rope_theta=10000.0,
                      rope_local_base_freq=100.0, pad_token_id=0,
                      layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"])
    elif arch == "phi3":
        # like Phi-3-mini: fused qkv_proj and gate_up_proj in the checkpoint, no biases, untied head,
        # no window (the config test covers one); Phi3Config's pad id 32000 is past this vocabulary
        from transformers import Phi3Config

        cls = Phi3Config
        common.update(sliding_window=None, pad_token_id=eos_id)
    elif arch == "mixtral":  # Mistral attention, every MLP sparse: 8 experts of 48, top-2 renormalised
        from transformers import MixtralConfig

        cls, common["sliding_window"] = MixtralConfig, None
        common.update(num_local_experts=8, num_experts_per_tok=2, intermediate_size=48)
    elif arch == "qwen3_moe":
        # Qwen3 attention (q/k norms, head_dim 32), 6 experts of 48 top-2 without renormalisation,
        # and layer 1 of 3 dense (mlp_only_layers) with its own intermediate size
        from transformers import Qwen3MoeConfig

        cls, common["tie_word_embeddings"], common["head_dim"] = Qwen3MoeConfig, True, 32
        common.update(num_hidden_layers=3, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=48,
                      norm_topk_prob=False, mlp_only_layers=[1], decoder_sparse_step=1, attention_bias=False)
    else:
        raise ValueError(f"unknown arch {arch!r}; expected llama, mistral, qwen2, qwen3, phi3, gemma3, mixtral or qwen3_moe")
    common.update(overrides)
    return cls(**common)


def make_tiny_model(path: str | Path, arch: str = "llama", seed: int = 0, **config_overrides: Any) -> Path:
    """Write a tiny random model folder for `arch` ("llama", "mistral", "qwen2", "qwen3", "phi3",
    "gemma3", "mixtral", "qwen3_moe") into `path`.

    `config_overrides` go to the transformers config (e.g. rope_scaling=..., num_hidden_layers=3).
    Returns the folder path.
    """
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM, GenerationConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok_json = tokenizer_json()
    tok = Tokenizer.from_str(tok_json)
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    config = _arch_config(arch, tok.get_vocab_size(), bos_id, eos_id, dict(config_overrides))

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        # HF initialises norms to 1 and biases to 0; perturb them so tests exercise both.
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.randn_like(param) * 0.1)
            elif name.endswith(".bias"):
                param.normal_(0.0, 0.1)
    model.save_pretrained(path, safe_serialization=True)
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, do_sample=False).save_pretrained(path)

    (path / "tokenizer.json").write_text(tok_json, encoding="utf-8")
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "add_bos_token": True,
        "model_max_length": config.max_position_embeddings,
        "chat_template": CHAT_TEMPLATE,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2), encoding="utf-8")
    (path / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}, indent=2), encoding="utf-8"
    )
    return path


# Llama 3.1-style RoPE scaling, with original_max_position_embeddings small enough that the
# tiny model's head_dim=16 frequencies fall in all three bands (kept, interpolated, scaled).
LLAMA3_ROPE_SCALING: dict[str, Any] = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
