"""Structured output cost: tokens/s at batch 16 with a JSON schema on every request vs. none.

"on": 16 concurrent chat requests, each with one of tests/helpers/json_schemas.py's schemas
(strict json_schema). "off": the same prompts without a grammar, each held to exactly the tokens
its "on" twin produced (max_tokens = that count, ignore_eos), so both runs have the same batch
shape and token count and only the masks differ. Also times one token mask fill for xgrammar
and (when installed) llguidance, the numbers the engine's choice of grammar library rests on.
Last line: JSON with `mask_overhead_pct` and `valid_fraction`.

    python bench/structured_output.py [--model-dir models/fairgate-demo] [--batch 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import jsonschema
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.base import GenerationRequest  # noqa: E402
from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig  # noqa: E402
from fairgate.backends.local.serving.backend import LocalBackend  # noqa: E402
from tests.helpers.json_schemas import SCHEMAS  # noqa: E402


def body(i: int, schema: dict | None, max_tokens: int) -> dict:
    b = {"messages": [{"role": "user", "content": f"Request {i}: give me JSON."}], "max_tokens": max_tokens,
         "seed": i}
    if schema is None:
        b["ignore_eos"] = True
    else:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    return b


async def run(backend: LocalBackend, bodies: list[dict], tag: str) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    out = await asyncio.gather(*(backend.complete(GenerationRequest.from_body(f"{tag}-{i}", "chat", b))
                                 for i, b in enumerate(bodies)))
    return time.perf_counter() - t0, out


async def measure(model_dir: str, batch: int, repeats: int, max_tokens: int) -> dict:
    backend = LocalBackend(AsyncEngine(EngineConfig(model_dir, num_kv_blocks=1024)))
    schemas = [SCHEMAS[i % len(SCHEMAS)] for i in range(batch)]
    try:
        await run(backend, [body(i, None, 8) for i in range(batch)], "warm")
        best_on, best_off, valid, total_tokens = float("inf"), float("inf"), 0, 0
        for r in range(repeats):
            t_on, on = await run(backend, [body(i, s, max_tokens) for i, s in enumerate(schemas)], f"on{r}")
            counts = [resp["usage"]["completion_tokens"] for resp in on]
            t_off, _ = await run(backend, [body(i, None, c) for i, c in enumerate(counts)], f"off{r}")
            best_on, best_off, total_tokens = min(best_on, t_on), min(best_off, t_off), sum(counts)
            valid = sum(_valid(resp, s) for resp, s in zip(on, schemas, strict=True))
    finally:
        await backend.aclose()
    tps_on, tps_off = total_tokens / best_on, total_tokens / best_off
    return {"batch": batch, "tokens": total_tokens, "tokens_per_s_on": round(tps_on, 1),
            "tokens_per_s_off": round(tps_off, 1), "mask_overhead_pct": round((tps_off - tps_on) / tps_off * 100, 1),
            "valid_fraction": valid / batch}


def _valid(resp: dict, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(resp["choices"][0]["message"]["content"]), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def mask_fill_us(model_dir: str, steps: int = 200) -> dict[str, float]:
    """Microseconds per token-mask fill along a schema, per installed grammar library."""
    from tokenizers import Tokenizer

    tok_json = (Path(model_dir) / "tokenizer.json").read_text()
    vocab_size = json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"]
    schema = json.dumps(SCHEMAS[17])
    result: dict[str, float] = {}
    import xgrammar as xgr

    from fairgate.backends.local.sampling.structured import GrammarRequest, StructuredCompiler

    tok = Tokenizer.from_str(tok_json)
    compiler = StructuredCompiler(tok_json, tok.get_vocab(with_added_tokens=True), vocab_size, [1], tok.decode)
    compiled = compiler.compile(GrammarRequest("json", SCHEMAS[17], "bench"))
    matcher = xgr.GrammarMatcher(compiled.grammar)
    mask = xgr.allocate_token_bitmask(1, vocab_size)
    result["xgrammar"] = _walk(lambda: matcher.fill_next_token_bitmask(mask, 0), matcher.is_terminated,
                               matcher.accept_token, vocab_size, steps,
                               lambda lg: xgr.apply_token_bitmask_inplace(lg, mask))
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        return result
    hf = PreTrainedTokenizerFast(tokenizer_object=tok)
    ll_tok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab_size)
    m = llguidance.LLMatcher(ll_tok, llguidance.LLMatcher.grammar_from_json_schema(schema))
    ll_mask = llguidance.torch.allocate_token_bitmask(1, vocab_size)
    result["llguidance"] = _walk(lambda: llguidance.torch.fill_next_token_bitmask(m, ll_mask, 0), m.is_stopped,
                                 m.consume_token, vocab_size, steps,
                                 lambda lg: llguidance.torch.apply_token_bitmask_inplace(lg, ll_mask))
    return result


def _walk(fill, done, accept, vocab_size: int, steps: int, apply) -> float:
    """Walk the grammar with random logits (restarting nothing: it stops when the grammar ends)."""
    gen = torch.Generator().manual_seed(0)
    spent, n = 0.0, 0
    for _ in range(steps):
        if done():
            break
        logits = torch.randn(1, vocab_size, generator=gen)
        t0 = time.perf_counter()
        fill()
        apply(logits)
        spent += time.perf_counter() - t0
        token = int(logits.argmax())
        if logits[0, token] == float("-inf") or not accept(token):
            break
        n += 1
    return round(spent / max(n, 1) * 1e6, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=str(ROOT / "models" / "fairgate-demo"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    fills = mask_fill_us(args.model_dir)
    res = asyncio.run(measure(args.model_dir, args.batch, args.repeats, args.max_tokens))
    res["mask_fill_us"] = fills
    print(f"{'library':<12} {'us/token mask':>14}")
    for lib, us in fills.items():
        print(f"{lib:<12} {us:>14.1f}")
    print(f"\n{'structured':<12} {'tokens/s':>10}   (batch {res['batch']}, {res['tokens']} tokens each run)")
    print(f"{'off':<12} {res['tokens_per_s_off']:>10.1f}")
    print(f"{'on':<12} {res['tokens_per_s_on']:>10.1f}   overhead {res['mask_overhead_pct']}%,"
          f" valid {res['valid_fraction']:.0%}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
