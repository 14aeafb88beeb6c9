"""`fairgate eval`: score an engine configuration against a baseline configuration.

Both sides run through fairgate's own model runner. Three measurements:
  (a) perplexity on held-out text (`--heldout`),
  (b) pass rate on a golden set (`--golden`, JSONL; see golden.py),
  (c) greedy agreement: the share of prompts (golden prompts plus held-out snippets) whose
      greedy completion is token-identical to the baseline's, and where outputs first diverge.
With `--speculative ngram|draft:DIR` the config side decodes through the engine with
speculative decoding and the baseline through the plain engine: agreement must be 1.0 (greedy
speculation is exact), perplexity is the runner's and equal, and the JSON adds the acceptance.
Prints a table, then one JSON line last; exits 1 when a threshold is crossed, so CI can gate.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fairgate.backends.local.evaluation.golden import GoldenItem, GoldenSetError, load_golden
from fairgate.backends.local.evaluation.report import (
    SideResult,
    Thresholds,
    compare,
    format_table,
    json_line,
)

if TYPE_CHECKING:  # the harness imports torch: `fairgate eval --help` must not
    from fairgate.backends.local.evaluation.harness import EngineOptions

EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE = 0, 1, 2


def agreement_prompts(text: str, count: int, max_chars: int = 200) -> list[str]:
    """`count` evenly spaced paragraphs of the held-out text, cut to `max_chars`."""
    paras = [p.strip("\n") for p in text.split("\n\n") if len(p.strip()) >= 40]
    if count <= 0 or not paras:
        return []
    step = max(1, len(paras) // count)
    return [p[:max_chars] for p in paras[::step][:count]]


def run_side(name: str, options: EngineOptions, heldout: str | None, golden: list[GoldenItem], prompts: list[str],
             args: argparse.Namespace) -> SideResult:
    # Imported here so `fairgate eval --help` and golden-set errors never load torch.
    from fairgate.backends.local.evaluation.harness import Harness
    from fairgate.backends.local.evaluation.progress import ProgressBar

    gen_prompts = [g.prompt for g in golden] + prompts
    max_tokens = [g.max_tokens or args.max_tokens for g in golden] + [args.max_tokens] * len(prompts)
    stops = [g.stop for g in golden] + [[] for _ in prompts]
    # A slot must hold a perplexity window, or a (possibly left-cut) prompt plus its answer.
    harness = Harness(options, max_seq_len=max([args.ctx + 1, *(n + 256 for n in max_tokens)]),
                      slots=args.batch_size)
    result = SideResult(name=options.describe())
    show = None if args.progress == "auto" else args.progress == "on"
    if heldout is not None:
        windows = harness.windows(heldout, args.ctx)
        if args.max_heldout_tokens:
            windows = windows[: max(1, args.max_heldout_tokens // args.ctx)]
        with ProgressBar(len(windows), f"{name}: perplexity", enabled=show) as bar:
            nll, count = harness.nll(windows, bar.update)
        result.perplexity = math.exp(nll / count) if nll / count < 700 else float("inf")
        result.heldout_tokens = count
    if gen_prompts:
        with ProgressBar(len(gen_prompts), f"{name}: greedy", enabled=show) as bar:
            outs = harness.greedy(gen_prompts, max_tokens, stops, bar.update)
        result.passed = [g.check(o.text) for g, o in zip(golden, outs[: len(golden)], strict=True)]
        result.turkish = [g.id.startswith("tr-") for g in golden]
        result.outputs = [o.token_ids for o in outs]
        result.texts = [o.text for o in outs]
        stats = harness.last_engine_stats
        if stats is not None and stats.spec_draft_tokens:
            result.spec_acceptance = stats.spec_accepted_tokens / stats.spec_draft_tokens
    return result


def run_eval(args: argparse.Namespace) -> int:
    from fairgate.backends.local.evaluation.harness import EngineOptions

    model = Path(args.model)
    heldout_path = args.heldout or _default(model, "heldout.txt")
    golden_path = args.golden or _default(model, "golden.jsonl")
    if heldout_path is None and golden_path is None:
        print("fairgate eval: give --heldout and/or --golden (or ship eval/ in the model folder)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        golden = load_golden(golden_path) if golden_path else []
    except (GoldenSetError, OSError) as e:
        print(f"fairgate eval: {e}", file=sys.stderr)
        return EXIT_USAGE
    heldout = Path(heldout_path).read_text(encoding="utf-8") if heldout_path else None
    prompts = agreement_prompts(heldout, args.agreement_prompts) if heldout else []
    config = EngineOptions(model, args.dtype, args.device, args.kv_cache_dtype, args.quantization)
    baseline = EngineOptions(Path(args.baseline_model or args.model), args.baseline_dtype, args.device,
                             args.baseline_kv_cache_dtype, args.baseline_quantization)
    speculative = getattr(args, "speculative", None)
    if speculative not in (None, "off"):  # both sides decode through the engine, one speculating
        config.speculative, baseline.speculative = speculative, "off"
        config.num_speculative_tokens = args.num_speculative_tokens
    # Baseline first: a crash in the candidate still shows what "good" looked like in the log.
    base = run_side("baseline", baseline, heldout, golden, prompts, args)
    cur = run_side("config", config, heldout, golden, prompts, args)
    thresholds = Thresholds(args.max_ppl_delta_pct, args.max_pass_rate_drop, args.min_greedy_agreement)
    metrics = compare(cur, base, thresholds)
    if args.verbose:
        for g, ok_b, ok_c, text in zip(golden, base.passed, cur.passed, cur.texts, strict=False):
            verdict = f"baseline {'pass' if ok_b else 'fail'}, config {'pass' if ok_c else 'fail'}"
            print(f"  {g.id}: {verdict}: {g.prompt[-40:]!r} -> {text!r}")
    print(format_table(metrics))
    print(json_line(metrics), flush=True)
    return EXIT_OK if metrics["passed"] else EXIT_THRESHOLD


def _default(model: Path, name: str) -> str | None:
    path = model / "eval" / name
    return str(path) if path.is_file() else None
