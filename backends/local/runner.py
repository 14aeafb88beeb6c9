"""ModelRunner: weights, the paged KV pool, and one forward pass per scheduler step."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

import kernels
from backends.local.batch import build_step
from backends.local.config import ModelConfig
from backends.local.loader import load_weights
from backends.local.model import DecoderModel
from backends.local.sampling import Sampler
from backends.local.spec_verify import verify_drafts
from backends.local.types import RunnerInput

log = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}
DEFAULT_CPU_KV_CACHE_MEMORY = 512 * 2**20
GPU_MEMORY_UTILIZATION = 0.9


def resolve_dtype(dtype: str | torch.dtype, cfg: ModelConfig, device: torch.device) -> torch.dtype:
    """"auto" = the checkpoint's dtype on CUDA, float32 on CPU (half-precision CPU matmuls are slow)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cpu":
            return torch.float32
        return _DTYPES.get(cfg.torch_dtype, torch.float32)
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16") from None


class ModelRunner:
    """Loads a Hugging Face Llama-family folder and runs ragged batches on a paged KV cache.

    KV pool: per layer one K and one V tensor [num_kv_blocks, block_size, num_kv_heads, head_dim].
    Size it with `num_kv_blocks`, or `kv_cache_memory` bytes; by default 512 MiB on CPU and
    90% of the free GPU memory after the weights on CUDA. `kv_cache_dtype` defaults to `dtype`.
    """

    def __init__(
        self,
        model_dir: str | Path,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype = "auto",
        block_size: int = 16,
        num_kv_blocks: int | None = None,
        kv_cache_memory: int | None = None,
        seed: int | None = None,
        kv_cache_dtype: str | torch.dtype | None = None,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.config = ModelConfig.from_dir(self.model_dir)
        self.device = torch.device(device)
        self.dtype = resolve_dtype(dtype, self.config, self.device)
        # A narrower KV pool (e.g. bfloat16 under float32 weights) holds twice the tokens in
        # the same memory; attention still computes in float32.
        self.kv_cache_dtype = self.dtype if kv_cache_dtype is None else resolve_dtype(
            kv_cache_dtype, self.config, self.device
        )
        self.block_size = block_size
        self.max_model_len = self.config.max_model_len
        self.eos_token_ids = self.config.eos_token_ids
        state = load_weights(self.model_dir, self.config, self.dtype, self.device)
        self.model = DecoderModel.from_state_dict(self.config, state, self.max_model_len)
        del state
        self.packed_linears = kernels.pack_linears(self.model, self.device)

        self.num_kv_blocks = self._kv_blocks(num_kv_blocks, kv_cache_memory)
        cfg = self.config
        # [layers, K|V, blocks, block_size, kv_heads, head_dim]; each [l, 0|1] view is contiguous.
        self.kv_cache = torch.zeros(
            cfg.num_layers, 2, self.num_kv_blocks, block_size, cfg.num_kv_heads, cfg.head_dim,
            dtype=self.kv_cache_dtype, device=self.device,
        )
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(cfg.num_layers)]
        generator = torch.Generator(device="cpu")
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
        self.sampler = Sampler(generator)
        log.info(
            "model runner: %s, %d layers, dtype %s on %s, %d KV blocks x %d tokens (%s), %s,"
            " %d packed linears",
            cfg.model_type, cfg.num_layers, self.dtype, self.device, self.num_kv_blocks,
            block_size, self.kv_cache_dtype, kernels.describe_backend(self.device), self.packed_linears,
        )

    @property
    def kv_block_bytes(self) -> int:
        cfg = self.config
        elem = torch.empty((), dtype=self.kv_cache_dtype).element_size()
        return 2 * cfg.num_layers * self.block_size * cfg.num_kv_heads * cfg.head_dim * elem

    def _kv_blocks(self, num_kv_blocks: int | None, kv_cache_memory: int | None) -> int:
        if num_kv_blocks is not None:
            blocks = num_kv_blocks
        else:
            if kv_cache_memory is None:
                if self.device.type == "cuda":
                    free, _ = torch.cuda.mem_get_info(self.device)
                    kv_cache_memory = int(free * GPU_MEMORY_UTILIZATION)
                else:
                    kv_cache_memory = DEFAULT_CPU_KV_CACHE_MEMORY
            blocks = kv_cache_memory // self.kv_block_bytes
        if blocks < 1:
            raise ValueError("KV cache too small: not even one block fits")
        return int(blocks)

    def _build(self, inputs: list[RunnerInput]):
        return build_step(
            inputs, self.block_size, self.max_model_len, self.model.cos_sin, self.device,
            self.config.vocab_size,
        )

    @torch.inference_mode()
    def execute(self, inputs: list[RunnerInput]) -> list[int | list[int] | None]:
        """Run one step; per input with `sample=True` the sampled token (a list of accepted
        drafts plus one token for an input with `num_spec_tokens`), None for the others."""
        if not inputs:
            return []
        step = self._build(inputs)
        hidden = self.model(step.input_ids, self.kv_caches, step.meta)  # [T, hidden]
        sampling = [i for i, inp in enumerate(inputs) if inp.sample]
        if not sampling:
            return [None] * len(inputs)
        # Logits only for the last token of each sampling input (the last 1 + k of a verify).
        rows: list[int] = []
        for i in sampling:
            end = step.token_start[i] + step.token_count[i]
            rows.extend(range(end - 1 - inputs[i].num_spec_tokens, end))
        rows_t = torch.tensor(rows, dtype=torch.int64, device=self.device)
        logits = self.model.compute_logits(hidden.index_select(0, rows_t))  # [sum(1 + k), vocab]
        out: list[int | list[int] | None] = [None] * len(inputs)
        plain = [i for i in sampling if not inputs[i].num_spec_tokens]
        verify = [i for i in sampling if inputs[i].num_spec_tokens]
        row_of, at = {}, 0
        for i in sampling:
            row_of[i] = at
            at += 1 + inputs[i].num_spec_tokens
        if plain:
            plain_rows = torch.tensor([row_of[i] for i in plain], dtype=torch.int64, device=self.device)
            tokens = self.sampler(
                logits.index_select(0, plain_rows), [inputs[i].sampling for i in plain],
                [inputs[i].num_output_tokens for i in plain],
            )
            for i, tok in zip(plain, tokens, strict=True):
                out[i] = tok
        if verify:
            spans = {i: logits[row_of[i] : row_of[i] + 1 + inputs[i].num_spec_tokens] for i in verify}
            for i, kept in zip(verify, verify_drafts([inputs[i] for i in verify], [spans[i] for i in verify],
                                                     self.sampler.generator), strict=True):
                out[i] = kept
        return out

    @torch.inference_mode()
    def forward_logits(self, inputs: list[RunnerInput]) -> list[torch.Tensor]:
        """Logits [len(token_ids), vocab] (float32) for every new token of each input, in order.

        Writes KV like `execute`; samples nothing.
        """
        if not inputs:
            return []
        step = self._build(inputs)
        logits = self.model.compute_logits(self.model(step.input_ids, self.kv_caches, step.meta))
        return [logits[s : s + n] for s, n in zip(step.token_start, step.token_count, strict=True)]
