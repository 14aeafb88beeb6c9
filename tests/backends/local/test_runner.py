"""ModelRunner: KV pool sizing, sampling rows, input validation, sharded checkpoints."""

from __future__ import annotations

import pytest
import torch

from fairgate.backends.local.engine.types import (
    RunnerInput,
    SamplingParams,
)
from fairgate.backends.local.model.loader import load_weights
from fairgate.backends.local.model.runner import ModelRunner

GREEDY = SamplingParams(temperature=0.0)


def test_kv_pool_sizing(tiny_model_dir):
    r = ModelRunner(tiny_model_dir, num_kv_blocks=10, block_size=8)
    assert r.kv_caches[0][0].shape == (10, 8, 2, 16)  # [blocks, block_size, kv_heads, head_dim]
    assert len(r.kv_caches) == 2 and r.max_model_len == 512 and r.eos_token_ids == (1,)
    # 2 (K,V) * 2 layers * 8 tokens * 2 heads * 16 dims * 4 bytes = 4 KiB per block
    assert r.kv_block_bytes == 4096
    assert ModelRunner(tiny_model_dir, kv_cache_memory=8192 * 37 + 100).num_kv_blocks == 37
    with pytest.raises(ValueError, match="too small"):
        ModelRunner(tiny_model_dir, kv_cache_memory=100)


def test_execute_samples_only_where_asked(tiny_model_dir):
    r = ModelRunner(tiny_model_dir, num_kv_blocks=16)
    a = RunnerInput("a", [5, 6, 7, 8], 0, [3], True, GREEDY)
    b = RunnerInput("b", [9, 10, 11], 0, [4], False, GREEDY)  # mid-prompt chunk: nothing sampled
    c = RunnerInput("c", [12], 0, [5], True, GREEDY)
    out = r.execute([a, b, c])
    assert out[1] is None and isinstance(out[0], int) and isinstance(out[2], int)
    logits = r.forward_logits([RunnerInput("a2", [5, 6, 7, 8], 0, [6], False, GREEDY)])[0]
    assert out[0] == int(logits[-1].argmax())
    assert r.execute([b]) == [None] and r.execute([]) == []


def test_bad_inputs_are_rejected(tiny_model_dir):
    r = ModelRunner(tiny_model_dir, num_kv_blocks=4)
    with pytest.raises(ValueError, match="block table covers 16"):
        r.execute([RunnerInput("a", list(range(20)), 0, [1], True, GREEDY)])
    with pytest.raises(ValueError, match="exceeds max_model_len"):
        r.execute([RunnerInput("a", [1, 2], 511, list(range(4)) * 8, True, GREEDY)])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        r.execute([RunnerInput("a", [1, 512], 0, [1], True, GREEDY)])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        r.execute([RunnerInput("a", [-1], 0, [1], True, GREEDY)])
    with pytest.raises(ValueError, match="no tokens"):
        r.execute([RunnerInput("a", [], 0, [1], True, GREEDY)])
    with pytest.raises(ValueError, match="dtype"):
        ModelRunner(tiny_model_dir, num_kv_blocks=4, dtype="int3")


def test_sharded_checkpoint_loads_the_same(tiny_qwen2_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    import shutil

    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32)
    hf.save_pretrained(tmp_path, max_shard_size="40KB")
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(tiny_qwen2_dir / name, tmp_path / name)
    assert (tmp_path / "model.safetensors.index.json").is_file()
    r1 = ModelRunner(tiny_qwen2_dir, num_kv_blocks=4)
    single = load_weights(tiny_qwen2_dir, r1.config, torch.float32)
    sharded = load_weights(tmp_path, r1.config, torch.float32)
    assert single.keys() == sharded.keys() and "layers.0.attn.qkv_proj.bias" in single
    assert all(torch.equal(single[k], sharded[k]) for k in single)
    assert single["layers.1.attn.qkv_proj.weight"].shape == (64 + 2 * 32, 64)
    assert single["layers.1.mlp.gate_up_proj.weight"].shape == (2 * 128, 64)
    r2 = ModelRunner(tmp_path, num_kv_blocks=4)
    inp = RunnerInput("a", [4, 5, 6], 0, [2], False, GREEDY)
    torch.testing.assert_close(r1.forward_logits([inp])[0], r2.forward_logits([inp])[0], atol=0, rtol=0)


def test_seeded_sampling_through_runner_is_reproducible(tiny_model_dir):
    params = SamplingParams(temperature=1.0, top_p=0.9, seed=42)
    outs = []
    for runner_seed in (1, 2):
        r = ModelRunner(tiny_model_dir, num_kv_blocks=8, seed=runner_seed)
        other = RunnerInput("o", [3, 4], 0, [1], True, SamplingParams(temperature=1.0))
        inp = RunnerInput("a", [7, 8, 9], 0, [5], True, params, num_output_tokens=3)
        outs.append(r.execute([other, inp] if runner_seed == 1 else [inp])[-1])
    assert outs[0] == outs[1]


def test_bfloat16_kv_cache_stays_close(tiny_model_dir):
    """A bf16 KV pool under fp32 weights: half the bytes, logits within bf16 rounding."""
    exact = ModelRunner(tiny_model_dir, num_kv_blocks=8)
    narrow = ModelRunner(tiny_model_dir, num_kv_blocks=8, kv_cache_dtype="bfloat16")
    assert narrow.kv_cache.dtype == torch.bfloat16 and narrow.kv_block_bytes * 2 == exact.kv_block_bytes
    prompt = list(range(5, 45))
    inp = RunnerInput("a", prompt, 0, [6, 1, 3], False, GREEDY)
    a, b = exact.forward_logits([inp])[0], narrow.forward_logits([inp])[0]
    assert not torch.equal(a, b)
    torch.testing.assert_close(b, a, atol=0.1, rtol=0.05)
    # decode steps read the narrow cache back
    step = RunnerInput("a", [7], 40, [6, 1, 3], False, GREEDY)
    torch.testing.assert_close(narrow.forward_logits([step])[0], exact.forward_logits([step])[0], atol=0.1, rtol=0.05)


def test_gemm_torch_keeps_f_linear_and_greedy_tokens_agree(tiny_model_dir):
    from fairgate.kernels.layers.panel_linear import packing_available

    plain = ModelRunner(tiny_model_dir, num_kv_blocks=16, gemm="torch")
    packed = ModelRunner(tiny_model_dir, num_kv_blocks=16)
    assert plain.packed_linears == 0 and type(plain.model.lm_head) is torch.nn.Linear
    assert packed.packed_linears == (2 * 4 + 1 if packing_available() else 0)  # 4 per layer + LM head
    step = [RunnerInput("a", list(range(5, 25)), 0, [0, 1], True, GREEDY)]
    assert plain.execute(step) == packed.execute(step)


def test_short_chunks_run_as_decode_rows_and_attend_as_a_long_chunk_does(tiny_model_dir):
    """A prompt run as chunks of 8 (decode rows: batch.DECODE_ROWS_MAX) gives the logits of
    the same prompt in one chunk of 40 (the prefill kernel), next to another sequence's decode."""
    from fairgate.backends.local.model.batch import DECODE_ROWS_MAX, build_step

    prompt = [(7 * i + 3) % 500 for i in range(40)]
    whole = ModelRunner(tiny_model_dir, num_kv_blocks=16, block_size=16)
    one = whole.forward_logits([RunnerInput("a", prompt, 0, [1, 2, 3], False, GREEDY)])[0]  # [40, vocab]
    chunked = ModelRunner(tiny_model_dir, num_kv_blocks=16, block_size=16)
    rows = []
    for start in range(0, 40, 8):
        other = RunnerInput("b", [9], start, [4, 5, 6], False, GREEDY)
        rows.append(chunked.forward_logits([other, RunnerInput("a", prompt[start:start + 8], start, [1, 2, 3], False,
                                                               GREEDY)])[1])
    torch.testing.assert_close(torch.cat(rows), one, rtol=1e-4, atol=1e-4)
    step = build_step([RunnerInput("a", prompt[:8], 32, [1, 2, 3], False, GREEDY),
                       RunnerInput("b", prompt, 0, [4, 5, 6], False, GREEDY)], 16, 512,
                      whole.model.cos_sin, torch.device("cpu"), 512, num_heads=4)
    assert 8 <= DECODE_ROWS_MAX < 40 and step.meta.num_decodes == 8  # a's rows; b is a prefill
    assert step.meta.decode_seq_lens.tolist() == list(range(33, 41))
    assert step.meta.decode_block_tables.tolist() == [[1, 2, 3]] * 8
    # With many heads the same chunk is too much work for rows; a verify chunk runs as rows anyway.
    wide = build_step([RunnerInput("a", prompt[:8], 32, [1, 2, 3], False, GREEDY)], 16, 512,
                      whole.model.cos_sin, torch.device("cpu"), 512, num_heads=128)
    verify = build_step([RunnerInput("a", prompt[:8], 32, [1, 2, 3], True, GREEDY, num_spec_tokens=7)], 16, 512,
                        whole.model.cos_sin, torch.device("cpu"), 512, num_heads=128)
    assert (wide.meta.num_decodes, verify.meta.num_decodes) == (0, 8)
