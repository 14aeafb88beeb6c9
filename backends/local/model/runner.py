"""ModelRunner: weights, the paged KV pool, and one forward pass per scheduler step."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import torch

from fairgate.backends.local.engine.types import RunnerInput, SampleResult
from fairgate.backends.local.model.batch import StepBatch, build_step
from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.gemma3 import decoder_class
from fairgate.backends.local.model.llama import LayerKV
from fairgate.backends.local.model.loader import load_weights
from fairgate.backends.local.model.quantization import quantized_linears, weight_bytes
from fairgate.backends.local.sampling.logprobs import prompt_logprobs
from fairgate.backends.local.sampling.sampler import Sampler, sample_batch
from fairgate.backends.local.sampling.structured import GrammarMasker, GrammarMasks
from fairgate.backends.local.speculative.verify import accept_greedy, verify_drafts
from fairgate.kernels import (
    KV_FORMATS,
    SCALE_DTYPE,
    KernelPlan,
    QuantMethod,
    cache_shape,
    hugepages,
)

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
    90% of the free GPU memory after the weights on CUDA. `kv_cache_dtype` defaults to `dtype`;
    "int8" and "int4" store quantized rows with float16 scales beside the blocks (kernels/ops/kv_quant.py).
    `quantization` ("int8", "int4", "int4-gN") quantizes the decoder linears of a float folder as
    it loads; None keeps what the folder holds (a `fairgate quantize` folder stays quantized).
    `gemm` picks how the float32 CPU linears run (auto, native, onednn, torch: `KernelPlan`).
    Which kernel runs each operation is chosen once, here (`self.kernels`, logged).
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
        quantization: str | None = None,
        gemm: str = "auto",
    ) -> None:
        self.model_dir = Path(model_dir)
        self.config = ModelConfig.from_dir(self.model_dir)
        self.device = torch.device(device)
        self.dtype = resolve_dtype(dtype, self.config, self.device)
        self._kv_layout(kv_cache_dtype)
        self.block_size = block_size
        self.max_model_len = self.config.max_model_len
        self.eos_token_ids = self.config.eos_token_ids
        self.quantization = self._quantization_method(quantization)
        plan = KernelPlan.choose(self.device, gemm)
        state = load_weights(self.model_dir, self.config, self.dtype, self.device)
        linears = None if self.quantization is None else quantized_linears(
            state, self.config.num_layers, self.quantization, self.config.quantization is not None,
            self.device, plan)
        self.model = decoder_class(self.config).from_state_dict(self.config, state, self.max_model_len, plan, linears)
        del state, linears
        self.packed_linears = plan.pack_linears(self.model)
        quant_panels = plan.quant_panels(self.model)  # before the stack, which points at what it attached
        native_stack = self.model.attach_native_stack()
        # greedy rows with nothing to apply to their logits take their tokens without them
        self.greedy_head: Callable[[torch.Tensor], list[int] | None] | None = plan.greedy_head(self.model.lm_head)
        moe_why = "mixture-of-experts layers (router, grouped experts) run per op" if self.config.moe else None
        self.kernels = plan.settled(self.model.native_stack, self.greedy_head, moe_why or self.model.native_stack_why,
                                   quant_panels)  # `describe()` for an endpoint

        self.num_kv_blocks = self._kv_blocks(num_kv_blocks, kv_cache_memory)
        self._allocate_kv_pool()
        cfg = self.config
        generator = torch.Generator(device="cpu")
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
        self.sampler = Sampler(generator, plan.argmax)
        self.grammar_masker = GrammarMasker()  # structured output masks, filled during the forward
        self.weight_bytes = weight_bytes(self.model)
        log.info(
            "model runner: %s, %d layers, dtype %s on %s, weights %s (%.1f MiB), %d KV blocks x %d"
            " tokens (%s), %s, %d packed linears%s",
            cfg.model_type, cfg.num_layers, self.dtype, self.device, self.quantization_name,
            self.weight_bytes / 2**20, self.num_kv_blocks, block_size, self.kv_cache_dtype,
            self.kernels.summary, self.packed_linears,
            ", every layer in one native call" if native_stack else "",
        )
        for line in self.kernels.log_lines():
            log.info("%s", line)

    def _kv_layout(self, kv_cache_dtype: str | torch.dtype | None) -> None:
        # A narrower KV pool (e.g. bfloat16 under float32 weights) holds twice the tokens in
        # the same memory; int8 / int4 codes ~4x / ~7x of float32. Attention computes in float32.
        self.kv_format = kv_cache_dtype if kv_cache_dtype in KV_FORMATS else None
        if self.kv_format is not None:
            self.kv_cache_dtype, self._kv_width, self._kv_scales = cache_shape(self.kv_format, self.config.head_dim)
            return
        self.kv_cache_dtype = self.dtype if kv_cache_dtype is None else resolve_dtype(
            kv_cache_dtype, self.config, self.device
        )
        self._kv_width, self._kv_scales = self.config.head_dim, 0

    def _allocate_kv_pool(self) -> None:
        cfg = self.config
        # [layers, K|V, blocks, block_size, kv_heads, head_dim]; each [l, 0|1] view is contiguous.
        # (4-bit codes: head_dim / 2 bytes a row.) Scales: [layers, K|V, blocks, block_size, kv_heads, S],
        # indexed by the same block ids, so a block's scales travel with it.
        pool = (cfg.num_layers, 2, self.num_kv_blocks, self.block_size, cfg.num_kv_heads)
        if self.device.type == "cpu":  # read through every decode step: on huge pages (kernels/native/hugepages.py)
            self.kv_cache = hugepages.zeros((*pool, self._kv_width), self.kv_cache_dtype)
        else:
            self.kv_cache = torch.zeros(*pool, self._kv_width, dtype=self.kv_cache_dtype, device=self.device)
        self.kv_scales = None if not self._kv_scales else torch.zeros(
            *pool, self._kv_scales, dtype=SCALE_DTYPE, device=self.device)
        scales = [(None, None) if self.kv_scales is None else (self.kv_scales[i, 0], self.kv_scales[i, 1])
                  for i in range(cfg.num_layers)]
        self.kv_caches = [LayerKV(self.kv_cache[i, 0], self.kv_cache[i, 1], *scales[i])
                          for i in range(cfg.num_layers)]

    @property
    def quantization_name(self) -> str:
        """The weights' quantization for logs, metrics and the model list: "int8", "int4-g64", "none"."""
        return "none" if self.quantization is None else self.quantization.name

    def _quantization_method(self, requested: str | None) -> QuantMethod | None:
        saved = self.config.quantization
        if requested in (None, "", "none"):
            return None if saved is None else QuantMethod.parse(saved)
        method = QuantMethod.parse(requested)
        if saved is not None and QuantMethod.parse(saved) != method:
            raise ValueError(f"{self.model_dir} is saved as {saved}; it cannot load as {method.name}")
        return method

    @property
    def kv_block_bytes(self) -> int:
        """Bytes one block takes across all layers, K and V, codes and scales."""
        cfg = self.config
        elem = torch.empty((), dtype=self.kv_cache_dtype).element_size()
        row = self._kv_width * elem + self._kv_scales * SCALE_DTYPE.itemsize
        return 2 * cfg.num_layers * self.block_size * cfg.num_kv_heads * row

    @property
    def kv_cache_name(self) -> str:
        """The KV cache's storage for logs, metrics and the model list: "int8", "int4", "float16"..."""
        return self.kv_format or str(self.kv_cache_dtype).removeprefix("torch.")

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

    def _build(self, inputs: list[RunnerInput]) -> StepBatch:
        assert self.model.cos_sin is not None  # set by DecoderModel.from_state_dict
        return build_step(
            inputs, self.block_size, self.max_model_len, self.model.cos_sin, self.device,
            self.config.vocab_size, self.config.num_heads, self.config.rope.long_from, self.model.cos_sin_local,
        )

    @torch.inference_mode()
    def execute(self, inputs: list[RunnerInput]) -> list[int | list[int] | SampleResult | None]:
        """Run one step; per input with `sample=True` the sampled token (a list of accepted
        drafts plus one token for an input with `num_spec_tokens`), None for the others. An
        input whose request asked for logprobs or prompt logprobs gets a `SampleResult`."""
        if not inputs:
            return []
        step = self._build(inputs)
        sampling = [i for i, inp in enumerate(inputs) if inp.sample]
        plain = [i for i in sampling if not inputs[i].num_spec_tokens]
        verify = [i for i in sampling if inputs[i].num_spec_tokens]
        masks = self.grammar_masker.start([inputs[i].sampling.grammar_state for i in plain],
                                          [inputs[i].output_token_ids for i in plain], self.config.vocab_size)
        hidden = self.model(step.input_ids, self.kv_caches, step.meta)  # [T, hidden]
        out: list[int | list[int] | SampleResult | None] = [None] * len(inputs)
        if sampling:
            # Logits only for the last token of each sampling input (the last 1 + k of a verify).
            rows: list[int] = []
            row_of: dict[int, int] = {}
            for i in sampling:
                end = step.token_start[i] + step.token_count[i]
                row_of[i] = len(rows)
                rows.extend(range(end - 1 - inputs[i].num_spec_tokens, end))
            rows_t = torch.tensor(rows, dtype=torch.int64, device=self.device)
            selected = hidden.index_select(0, rows_t)  # [sum(1 + k), hidden]
            greedy = self._greedy_tokens(inputs, sampling, selected)
            if greedy is not None:
                for i in plain:
                    out[i] = greedy[row_of[i]]
                for i in verify:
                    k = inputs[i].num_spec_tokens
                    drafts = inputs[i].token_ids[len(inputs[i].token_ids) - k :]
                    out[i] = accept_greedy(greedy[row_of[i] : row_of[i] + 1 + k], drafts)
            else:
                self._sample(inputs, plain, verify, row_of, self.model.compute_logits(selected), masks, out)
        self._add_prompt_logprobs(inputs, hidden, step.token_start, out)
        self._add_pooled(inputs, hidden, step.token_start, out)
        return out

    def _sample(self, inputs: list[RunnerInput], plain: list[int], verify: list[int], row_of: dict[int, int],
                logits: torch.Tensor, masks: Future[GrammarMasks] | None,
                out: list[int | list[int] | SampleResult | None]) -> None:
        """Sample the plain rows and verify the drafts of the others from their logits
        [sum(1 + k), vocab] (input i's rows start at row_of[i]), into `out`."""
        if plain:
            plain_logits = logits  # no verify in the step: every row is a plain one, no copy
            if verify:
                plain_rows = torch.tensor([row_of[i] for i in plain], dtype=torch.int64, device=self.device)
                plain_logits = logits.index_select(0, plain_rows)
            tokens: Sequence[int | SampleResult] = sample_batch(self.sampler, plain_logits, [inputs[i] for i in plain],
                                                                self.eos_token_ids, masks)
            for i, tok in zip(plain, tokens, strict=True):
                out[i] = tok
        if verify:
            spans = [logits[row_of[i] : row_of[i] + 1 + inputs[i].num_spec_tokens] for i in verify]
            kept = verify_drafts([inputs[i] for i in verify], spans, self.sampler.generator)
            for i, toks in zip(verify, kept, strict=True):
                out[i] = toks

    def _greedy_tokens(self, inputs: list[RunnerInput], sampling: list[int], hidden: torch.Tensor) -> list[int] | None:
        """The argmax token of every selected row (`hidden`, a plain row's one and a verify
        input's 1 + k) from the greedy head, which gives the argmax of the logits without
        computing them all, when every sampling input is plain greedy (no logits processor,
        logprobs or grammar); None where it does not apply. A verify input's drafts are then
        kept while they equal those argmaxes (`accept_greedy`), as `verify_drafts` keeps them
        from the full logits: the same tokens, by the head's bound."""
        if self.greedy_head is None:
            return None
        for i in sampling:
            p = inputs[i].sampling
            if not p.greedy or p.needs_processing or p.logprobs is not None:
                return None
        return self.greedy_head(hidden)

    @staticmethod
    def _add_pooled(inputs: list[RunnerInput], hidden: torch.Tensor, token_start: list[int],
                    out: list[int | list[int] | SampleResult | None]) -> None:
        """Embeddings: the sum of this step's hidden rows of prompt positions, per pooling input."""
        for i, inp in enumerate(inputs):
            if not inp.sampling.pool or inp.start_pos >= len(inp.prompt_token_ids):
                continue
            rows = min(len(inp.token_ids), len(inp.prompt_token_ids) - inp.start_pos)
            start = token_start[i]
            total = hidden[start : start + rows].float().sum(dim=0)  # [hidden]
            res = out[i]
            assert not isinstance(res, list)  # drafts are verified past the prompt, never here
            if not isinstance(res, SampleResult):
                res = out[i] = SampleResult(res)
            res.pooled = (inp.start_pos, total, rows)

    def _add_prompt_logprobs(self, inputs: list[RunnerInput], hidden: torch.Tensor, token_start: list[int],
                             out: list[int | list[int] | SampleResult | None]) -> None:
        """Prompt logprobs (echo) from this step's hidden states of prompt chunks: the logits
        head over their rows only, no extra forward pass."""
        for i, inp in enumerate(inputs):
            k = inp.sampling.prompt_logprobs
            if k is None or inp.start_pos >= len(inp.prompt_token_ids) - 1:
                continue
            start = token_start[i]
            logits = self.model.compute_logits(hidden[start : start + len(inp.token_ids)])  # [n, vocab]
            entries = prompt_logprobs(logits, inp.prompt_token_ids, inp.start_pos, k)
            res = out[i]
            assert not isinstance(res, list)  # drafts are verified past the prompt, never here
            if not isinstance(res, SampleResult):
                res = out[i] = SampleResult(res)
            res.prompt_logprobs = entries

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
