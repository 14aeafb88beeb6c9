"""Session fixtures shared by every suite (add yours below; keep them cheap)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# `python -m pytest` puts the repository root first on sys.path, where its folder `kernels/` would
# shadow Hugging Face's `kernels` distribution (transformers imports it). Our rooms are imported
# only as `fairgate.*` (installed); the root is needed here just for `tests.*`, so it goes last.
_ROOT = str(Path(__file__).resolve().parents[1])
sys.path[:] = [p for p in sys.path if p not in ("", _ROOT)] + [_ROOT]

import pytest  # noqa: E402

from tests.helpers.tiny_models import LLAMA3_ROPE_SCALING, make_tiny_model  # noqa: E402

# Upstream API keys are stored encrypted (gateway/store/secret_box.py): every gateway a test starts,
# in-process or as `fairgate serve`, has this key unless the test says otherwise.
TEST_SECRETS_KEY = "XZwluX2zJaOmb5PsHn5xSU_VoTwy-yb0Uc8pr5dBEIM="
os.environ.setdefault("FAIRGATE_SECRETS_KEY", TEST_SECRETS_KEY)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama (hidden 64, 2 layers, 4 heads, 2 kv heads) with tokenizer and template."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="session")
def tiny_mistral_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-mistral"), "mistral")


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen2: qkv bias and tied embeddings."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), "qwen2")


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen3 dense: per-head q/k RMSNorm, head_dim 32 (not hidden / heads), tied embeddings."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen3"), "qwen3")


@pytest.fixture(scope="session")
def tiny_phi3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Phi-3: q/k/v and gate/up stored fused (qkv_proj, gate_up_proj), untied head."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-phi3"), "phi3")


@pytest.fixture(scope="session")
def tiny_phi3_partial_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Phi-3 as Phi-4-mini configures it: partial_rotary_factor 0.75 (12 of 16 head dims rotate),
    tied embeddings."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-phi3-partial"), "phi3", seed=3, partial_rotary_factor=0.75,
                           tie_word_embeddings=True)


@pytest.fixture(scope="session")
def tiny_gemma3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 text: sliding-window layers (window 8, their own RoPE base) around a full one,
    (1 + w) norms, GELU-tanh MLP, head_dim 32, tied embeddings (tests/helpers/tiny_models.py)."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-gemma3"), "gemma3", seed=1)


@pytest.fixture(scope="session")
def tiny_llama3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Llama with Llama-3.1 `rope_scaling` (rope_type llama3) and rope_theta 500000."""
    return make_tiny_model(
        tmp_path_factory.mktemp("tiny-llama3"), "llama",
        rope_scaling=dict(LLAMA3_ROPE_SCALING), rope_theta=500000.0,
    )
