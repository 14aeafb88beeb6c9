"""What the engine needs to know about a model, parsed from a Hugging Face folder.

Reads config.json (Llama 2/3, Mistral, Qwen2, Qwen3 dense; Mixtral and Qwen3-MoE, see moe_config.py) and generation_config.json. Accepts both the
classic `rope_theta` + `rope_scaling` keys and the transformers-5 `rope_parameters` block.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairgate.backends.local.model.moe_config import MOE_MODEL_TYPES, MoeConfig, parse_moe

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", *MOE_MODEL_TYPES)
SUPPORTED_ROPE_TYPES = ("default", "linear", "dynamic", "llama3")


class ModelConfigError(ValueError):
    """The folder is not a model this engine can run; the message says why."""


@dataclass(slots=True)
class RopeConfig:
    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    # llama3 only
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int | None = None


@dataclass(slots=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope: RopeConfig = field(default_factory=RopeConfig)
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    # Qwen3: an RMSNorm over each query and key head ([head_dim] weights), after the projection
    # and before RoPE.
    qk_norm: bool = False
    sliding_window: int | None = None
    torch_dtype: str = "float32"
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    # Weight-only quantization a folder was saved with (`fairgate quantize`), e.g. "int8".
    quantization: str | None = None
    # Mixtral, Qwen3-MoE: the sparse MLP's experts and routing (None: every MLP is dense)
    moe: MoeConfig | None = None

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def max_model_len(self) -> int:
        """Longest sequence served exactly: a sliding window shorter than the context caps it,
        since the engine attends to the whole context (no windowed attention)."""
        if self.sliding_window is not None and self.sliding_window < self.max_position_embeddings:
            return self.sliding_window
        return self.max_position_embeddings

    @classmethod
    def from_dict(cls, cfg: dict[str, Any], generation: dict[str, Any] | None = None) -> ModelConfig:
        """Build from config.json contents (and optionally generation_config.json contents)."""
        model_type = cfg.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise ModelConfigError(f"unsupported hidden_act {act!r}; only silu (SwiGLU) is supported")
        num_heads = int(cfg["num_attention_heads"])
        num_kv_heads = int(cfg.get("num_key_value_heads") or num_heads)
        if num_heads % num_kv_heads:
            raise ModelConfigError("num_attention_heads must be a multiple of num_key_value_heads")
        hidden = int(cfg["hidden_size"])
        head_dim = int(cfg.get("head_dim") or hidden // num_heads)
        attention_bias = bool(cfg.get("attention_bias", False))
        # Qwen2 always has q/k/v bias (and no o bias); Llama's and Qwen3's attention_bias covers
        # all four (Qwen3 defaults to none).
        qkv_bias = model_type == "qwen2" or attention_bias
        o_bias = model_type != "qwen2" and attention_bias
        use_window = model_type in ("mistral", "mixtral") or bool(cfg.get("use_sliding_window", False))
        window = cfg.get("sliding_window") if use_window else None
        return cls(
            model_type=model_type,
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(cfg["intermediate_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            rope=_parse_rope(cfg),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=qkv_bias,
            o_bias=o_bias,
            mlp_bias=bool(cfg.get("mlp_bias", False)),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            sliding_window=int(window) if window else None,
            torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32"),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=_eos_ids(cfg, generation or {}),
            quantization=_quantization(cfg),
            moe=parse_moe(model_type, cfg, int(cfg["num_hidden_layers"])),
        )

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> ModelConfig:
        """Read `model_dir`/config.json and, if present, generation_config.json."""
        model_dir = Path(model_dir)
        cfg_path = model_dir / "config.json"
        if not cfg_path.is_file():
            raise ModelConfigError(f"no config.json in {model_dir}")
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        gen_path = model_dir / "generation_config.json"
        gen = json.loads(gen_path.read_text(encoding="utf-8")) if gen_path.is_file() else {}
        return cls.from_dict(cfg, gen)


def _quantization(cfg: dict[str, Any]) -> str | None:
    """The method of a fairgate-quantized folder; another tool's quantization is refused."""
    qc = cfg.get("quantization_config")
    if not qc:
        return None
    method = qc.get("method")
    if qc.get("quant_method") != "fairgate" or not isinstance(method, str):
        raise ModelConfigError(
            f"unsupported quantization_config {qc.get('quant_method')!r}: only folders written by"
            " `fairgate quantize` (quant_method 'fairgate') load")
    return method


def _as_ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _eos_ids(cfg: dict[str, Any], generation: dict[str, Any]) -> tuple[int, ...]:
    """Union of config and generation-config eos ids, in first-seen order (Llama 3 lists several)."""
    ids = _as_ids(cfg.get("eos_token_id")) + _as_ids(generation.get("eos_token_id"))
    return tuple(dict.fromkeys(ids))


def _parse_rope(cfg: dict[str, Any]) -> RopeConfig:
    params = dict(cfg.get("rope_parameters") or {})
    scaling = cfg.get("rope_scaling") or {}
    params.update({k: v for k, v in scaling.items() if v is not None})
    theta = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    # Old configs say "type"; newer ones "rope_type".
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ModelConfigError(
            f"unsupported rope type {rope_type!r}; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    orig = params.get("original_max_position_embeddings")
    return RopeConfig(
        theta=theta,
        rope_type=rope_type,
        factor=float(params.get("factor", 1.0)),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(orig) if orig else None,
    )
