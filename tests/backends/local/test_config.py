"""ModelConfig parsing and RoPE frequencies against transformers' own rope init."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fairgate.backends.local.model.config import ModelConfig, ModelConfigError
from fairgate.backends.local.model.rope import inv_frequencies

BASE = {
    "model_type": "llama", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
}


def test_llama_classic_keys_and_eos_union(tmp_path):
    cfg = dict(BASE, rope_theta=500000.0, eos_token_id=[5, 6], bos_token_id=1, torch_dtype="bfloat16",
               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [6, 9]}))
    mc = ModelConfig.from_dir(tmp_path)
    assert (mc.num_heads, mc.num_kv_heads, mc.head_dim) == (8, 2, 8)
    assert mc.q_size == 64 and mc.kv_size == 16
    assert mc.rope.theta == 500000.0 and mc.rope.rope_type == "llama3"
    assert mc.rope.original_max_position_embeddings == 8192
    assert mc.eos_token_ids == (5, 6, 9)
    assert mc.torch_dtype == "bfloat16" and mc.max_model_len == 4096
    assert not mc.qkv_bias and not mc.tie_word_embeddings


def test_transformers5_rope_parameters_and_old_type_key():
    mc = ModelConfig.from_dict(dict(BASE, rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}))
    assert (mc.rope.rope_type, mc.rope.factor, mc.rope.theta) == ("linear", 2.0, 1e4)
    old = ModelConfig.from_dict(dict(BASE, rope_scaling={"type": "dynamic", "factor": 4.0}))
    assert (old.rope.rope_type, old.rope.factor) == ("dynamic", 4.0)


def test_biases_head_dim_and_window():
    qwen = ModelConfig.from_dict(dict(BASE, model_type="qwen2", tie_word_embeddings=True, eos_token_id=3))
    assert qwen.qkv_bias and not qwen.o_bias and qwen.tie_word_embeddings and qwen.eos_token_ids == (3,)
    llama = ModelConfig.from_dict(dict(BASE, attention_bias=True, head_dim=32))
    assert llama.qkv_bias and llama.o_bias and llama.head_dim == 32 and llama.q_size == 256
    mistral = ModelConfig.from_dict(dict(BASE, model_type="mistral", sliding_window=1024))
    assert mistral.max_model_len == 1024  # whole-context attention is exact only inside the window
    assert ModelConfig.from_dict(dict(BASE, model_type="mistral", sliding_window=None)).max_model_len == 4096


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "gpt2"}, "unsupported model_type"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"num_key_value_heads": 3}, "multiple"),
        ({"rope_scaling": {"rope_type": "mrope", "factor": 4.0}}, "rope type"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
        ({"model_type": "gpt_oss"}, "'gpt_oss' is not supported: its attention sinks .* MXFP4 expert weights"),
    ],
)
def test_unsupported_configs_fail_clearly(change, message):
    with pytest.raises(ModelConfigError, match=message):
        ModelConfig.from_dict(dict(BASE, **change))


def test_fairgate_engine_refuses_gpt_oss_at_startup_saying_what_is_missing(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(BASE, model_type="gpt_oss")))
    done = subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(tmp_path),
                           "--port", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "fairgate engine: model_type 'gpt_oss' is not supported: its attention sinks" in done.stderr


def test_missing_config_json(tmp_path):
    with pytest.raises(ModelConfigError, match="no config.json"):
        ModelConfig.from_dir(tmp_path)


@pytest.mark.parametrize(
    "scaling",
    [
        None,
        {"rope_type": "linear", "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 256},
    ],
)
def test_inv_frequencies_match_transformers(scaling):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kwargs = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, rope_theta=50000.0,
                  max_position_embeddings=4096, vocab_size=128, intermediate_size=64, num_hidden_layers=1)
    if scaling:
        kwargs["rope_scaling"] = dict(scaling)
    hf_cfg = transformers.LlamaConfig(**kwargs)
    ours = inv_frequencies(ModelConfig.from_dict(json.loads(hf_cfg.to_json_string())))
    if scaling is None:
        theirs = 1.0 / (50000.0 ** (torch.arange(0, 64, 2, dtype=torch.int64).float() / 64))
    else:
        theirs, _ = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](hf_cfg, "cpu")
    torch.testing.assert_close(ours, theirs.float(), rtol=1e-6, atol=0)
