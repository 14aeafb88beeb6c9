"""What the engine needs to know about a model, parsed from a Hugging Face folder.

Reads config.json (Llama 2/3, Mistral, Qwen2, Qwen3 dense, Phi-3, Gemma 3 text; Mixtral and Qwen3-MoE, see
moe_config.py) and generation_config.json. Accepts both the
classic `rope_theta` + `rope_scaling` keys and the transformers-5 `rope_parameters` block.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairgate.backends.local.model.moe_config import MOE_MODEL_TYPES, MoeConfig, parse_moe

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text", *MOE_MODEL_TYPES)
GEMMA3 = "gemma3_text"
SLIDING, FULL = "sliding_attention", "full_attention"  # Gemma 3's layer types
# Families people ask for that this engine cannot run yet, with what is missing
NOT_YET = {
    "gpt_oss": "its attention sinks (a learned logit per head in every softmax) and its MXFP4 expert weights"
               " are not implemented; its harmony output is (--reasoning-parser gpt_oss), so serve the"
               " weights with vLLM and put it behind the gateway",
}
SUPPORTED_ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")


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
    # yarn and longrope: cos and sin are multiplied by this (None: derived from `factor` as
    # transformers does, backends/local/model/rope.py)
    attention_factor: float | None = None
    # yarn only: the ramp between interpolated and extrapolated frequencies, and DeepSeek's mscale
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    # longrope only: per-frequency divisors for sequences within / past the original context
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()
    # partial_rotary_factor: the share of each head that rotates (its first dims, Phi-4-mini's 0.75)
    rotary_fraction: float = 1.0

    @property
    def long_from(self) -> int | None:
        """longrope: a sequence longer than this rotates by the long factors (the table's second
        half, backends/local/model/rope.py); None for the other types (one table row a position)."""
        return self.original_max_position_embeddings if self.rope_type == "longrope" else None


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
    # Mistral's window over every layer: the engine caps max_model_len at it (see max_model_len)
    sliding_window: int | None = None
    # Gemma 3 (backends/local/model/gemma3.py): a GELU-tanh MLP, (1 + w) norms (`norm_offset`,
    # folded into the weights at load), the embedding times `embed_scale`, pre/post norms around
    # attention and MLP, and interleaved layers: `layer_types[i]` SLIDING attends to the last
    # `local_window` positions (really windowed) and rotates by `local_rope`, FULL by `rope`.
    hidden_act: str = "silu"
    norm_offset: float = 0.0
    embed_scale: float | None = None
    query_pre_attn_scalar: float | None = None  # the attention scale is its -1/2 power (else head_dim's)
    layer_types: tuple[str, ...] = ()
    local_window: int | None = None
    local_rope: RopeConfig | None = None
    final_logit_softcapping: float | None = None
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
    def rotary_dim(self) -> int:
        """How many of each q/k head's dims rotate (the first ones; the rest pass unrotated)."""
        return int(self.head_dim * self.rope.rotary_fraction)

    @property
    def attention_scale(self) -> float:
        scale: float = float(self.query_pre_attn_scalar or self.head_dim) ** -0.5  # as transformers
        return scale

    def layer_window(self, layer: int) -> int | None:
        """The attention window of `layer` (Gemma 3's sliding layers), None for the whole context."""
        return self.local_window if self.layer_types and self.layer_types[layer] == SLIDING else None

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
        if model_type in NOT_YET:
            raise ModelConfigError(f"model_type {model_type!r} is not supported: {NOT_YET[model_type]}")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        act = cfg.get("hidden_act", "silu")
        if model_type != GEMMA3 and act != "silu":
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
        # transformers' Mistral, Mixtral and Phi3 window whenever the config names one
        use_window = model_type in ("mistral", "mixtral", "phi3") or bool(cfg.get("use_sliding_window", False))
        window = cfg.get("sliding_window") if use_window else None
        gemma = _gemma3_fields(cfg) if model_type == GEMMA3 else {}
        rope = _parse_rope(cfg, int(cfg.get("max_position_embeddings", 2048)))
        _check_partial_rotary(model_type, rope.rotary_fraction, head_dim)
        fields: dict[str, Any] = dict(
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
            rope=rope,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=qkv_bias,
            o_bias=o_bias,
            mlp_bias=bool(cfg.get("mlp_bias", False)),
            qk_norm=model_type in ("qwen3", "qwen3_moe", GEMMA3),
            sliding_window=int(window) if window else None,
            torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32"),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=_eos_ids(cfg, generation or {}),
            quantization=_quantization(cfg),
            moe=parse_moe(model_type, cfg, int(cfg["num_hidden_layers"])),
        )
        return cls(**{**fields, **gemma})

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


def _gemma3_fields(cfg: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3's own switches (transformers' Gemma3TextConfig and modeling_gemma3.py)."""
    act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise ModelConfigError(f"unsupported gemma3 hidden_activation {act!r}; only gelu_pytorch_tanh is supported")
    if cfg.get("attn_logit_softcapping") is not None:
        # transformers' Gemma3Attention never passes it to the attention (no released Gemma 3 sets it)
        raise ModelConfigError("gemma3 attn_logit_softcapping is not supported: transformers' Gemma 3 does not"
                               " apply it either, so no reference output exists to match")
    if cfg.get("use_bidirectional_attention"):
        raise ModelConfigError("gemma3 use_bidirectional_attention (an embedding model) is not supported")
    layers = int(cfg["num_hidden_layers"])
    pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6)
    types = tuple(cfg.get("layer_types") or (SLIDING if (i + 1) % pattern else FULL for i in range(layers)))
    if len(types) < layers or set(types) - {SLIDING, FULL}:
        raise ModelConfigError(f"gemma3 layer_types must name {SLIDING} or {FULL} for each of {layers} layers")
    max_positions = int(cfg.get("max_position_embeddings", 131072))
    params = cfg.get("rope_parameters") or {}
    if FULL in params or SLIDING in params:  # transformers 5: one block per layer type
        full = dict(cfg, rope_parameters=params.get(FULL) or {}, rope_scaling=None)
        local = dict(cfg, rope_parameters=params.get(SLIDING) or {}, rope_scaling=None)
    else:  # the released configs: rope_theta (+ rope_scaling) global, rope_local_base_freq local
        full = dict(cfg, rope_theta=cfg.get("rope_theta", 1_000_000.0))
        local = dict(cfg, rope_theta=cfg.get("rope_local_base_freq", 10_000.0), rope_parameters=None,
                     rope_scaling=None)
    full.setdefault("rope_theta", 1_000_000.0)
    local.setdefault("rope_theta", 10_000.0)
    window = cfg.get("sliding_window")
    return dict(
        rope=_parse_rope(full, max_positions),
        local_rope=_parse_rope(local, max_positions),
        hidden_act=act,
        norm_offset=1.0,
        embed_scale=float(cfg["hidden_size"]) ** 0.5,
        query_pre_attn_scalar=float(cfg.get("query_pre_attn_scalar") or 256),
        layer_types=types[:layers],
        local_window=int(window) if window and SLIDING in types[:layers] else None,
        final_logit_softcapping=cfg.get("final_logit_softcapping"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        max_position_embeddings=max_positions,
    )


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


def _parse_rope(cfg: dict[str, Any], max_positions: int) -> RopeConfig:
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
    partial = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
    orig = params.get("original_max_position_embeddings")
    if rope_type in ("yarn", "longrope"):
        # as transformers' standardize_rope_params: Phi3's top-level key wins, else the model's length
        orig = cfg.get("original_max_position_embeddings") or orig or max_positions
    factor = params.get("factor")
    if factor is None:  # yarn and longrope derive it from the two lengths (DeepSeek-V3, Phi3)
        factor = max_positions / orig if rope_type in ("yarn", "longrope") and orig else 1.0

    def optional(key: str) -> float | None:
        return None if params.get(key) is None else float(params[key])

    return RopeConfig(
        theta=theta,
        rope_type=rope_type,
        factor=float(factor),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(orig) if orig else None,
        attention_factor=optional("attention_factor"),
        beta_fast=float(params.get("beta_fast") or 32.0),
        beta_slow=float(params.get("beta_slow") or 1.0),
        mscale=optional("mscale"),
        mscale_all_dim=optional("mscale_all_dim"),
        truncate=bool(params.get("truncate", True)),
        short_factor=tuple(float(f) for f in params.get("short_factor") or ()),
        long_factor=tuple(float(f) for f in params.get("long_factor") or ()),
        rotary_fraction=1.0 if partial is None else float(partial),
    )


def _check_partial_rotary(model_type: str, fraction: float, head_dim: int) -> None:
    """Partial rotary as transformers' Phi-3 applies it (the first dims of a head rotate as
    rotate-half pairs of their own; backends/local/model/rope.py); other families' layouts differ."""
    if fraction == 1.0:
        return
    if model_type != "phi3":
        raise ModelConfigError(f"unsupported partial_rotary_factor {fraction} for {model_type}: only phi3's"
                               " partial rotary is supported (elsewhere only whole-head RoPE, 1.0)")
    rotary = int(head_dim * fraction)
    if not 0 < rotary < head_dim or rotary % 2 or head_dim % 2:
        raise ModelConfigError(f"unsupported partial_rotary_factor {fraction}: {rotary} of {head_dim} head dims"
                               " must rotate, an even number")
