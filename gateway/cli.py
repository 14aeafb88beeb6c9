"""`fairgate` command line. Each subcommand's work lives in its own module, imported lazily
so `fairgate --help` stays fast and one subcommand's dependencies never load for another."""

from __future__ import annotations

import argparse
import sys

from fairgate.backends.collector import DEFAULT_THRESHOLD, parse_threshold
from fairgate.backends.local.engine.cores import default_omp_wait
from fairgate.gateway.loadgen.cli import (
    add_parser as add_bench_command,  # light: the run's imports are lazy
)
from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD

KV_CHOICES = ["float32", "float16", "bfloat16", "int8", "int4"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="Hugging Face model folder")
    p.add_argument("--served-model-name", default=None, help="name in /v1/models (default: folder name)")
    p.add_argument("--host", default="127.0.0.1",
                   help="loopback by default; any other address needs --api-key (see docs/fleet.md)")
    p.add_argument("--port", type=int, default=8100, help="0 picks a free port (printed)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16", "bfloat16"])
    p.add_argument("--kv-cache-dtype", default="auto", choices=["auto", *KV_CHOICES],
                   help="auto = the weights' dtype; a 16-bit cache holds twice the tokens and reads half the"
                        " bytes; int8 / int4 store quantized rows (about 1.9x / 3.5x the tokens of float16)")
    p.add_argument("--quantization", default=None, metavar="int8|int8-a8|int4[-gN]",
                   help="weight-only quantization of the decoder linears at load time")
    p.add_argument("--gemm", default="auto", choices=["auto", "native", "onednn", "torch"],
                   help="float32 CPU linears: native panels with oneDNN's bits, oneDNN pre-packed "
                        "(auto: native where it builds, else oneDNN) or torch's F.linear")
    p.add_argument("--block-size", type=int, default=16)
    kv = p.add_mutually_exclusive_group()
    kv.add_argument("--num-kv-blocks", type=int, default=None)
    kv.add_argument("--kv-cache-memory", type=int, default=None, help="bytes for the KV cache")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=512)
    p.add_argument("--tool-call-parser", choices=["hermes", "llama3_json"], default="hermes",
                   help="how the model writes tool calls (Hermes <tool_call> tags or Llama 3 JSON)")
    p.add_argument("--reasoning-parser", choices=["qwen3", "deepseek_r1", "gpt_oss"], default=None,
                   help="return a reasoning model's thinking (<think> part, gpt-oss's analysis channel)"
                        " as reasoning_content, apart from the answer")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--no-prefix-caching", action="store_true")
    _scheduling_args(p)
    p.add_argument("--speculative", default="off", metavar="ngram|draft:DIR|off",
                   help="speculative decoding: n-gram prompt lookup or a draft model folder (same vocabulary)")
    p.add_argument("--num-speculative-tokens", type=int, default=4, help="most draft tokens per request per step")
    p.add_argument("--control-secret", default=None, help="shared secret for /control/* (env FAIRGATE_CONTROL_SECRET)")
    p.add_argument("--api-key", default=None,
                   help="Bearer key every /v1 call and every tenant header needs (env FAIRGATE_ENGINE_API_KEY)")
    p.add_argument("--allow-anonymous", action="store_true",
                   help="with --api-key: callers without it may generate as tenant 'anonymous', no tenant headers")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback --host without --api-key (callers are trusted with tenant headers)")
    p.add_argument("--metrics-anonymous", action="store_true",
                   help="serve /metrics without a token (default: FAIRGATE_METRICS_TOKEN or the --api-key)")
    p.add_argument("--metrics-tenant-labels", action="store_true", help="label request metrics by tenant id")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                   help="what one request may ask for, e.g. max_n=16 or max_guided_choices=1000 "
                        "(backends/openai_wire/limits.py lists them); repeat for several")
    p.add_argument("--grammar-timeout", type=float, default=3.0, metavar="S",
                   help="a structured-output grammar compiling longer than S seconds is refused (400)")
    p.add_argument("--grammar-cache-mb", type=float, default=64.0,
                   help="memory for compiled grammars (least recently used evicted)")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    p.add_argument("--log-requests", action="store_true",
                   help="one info line per finished request (id, tenant, tokens, queue, TTFT, latency; never text)")
    p.add_argument("--stats-interval", type=float, default=10.0, metavar="S",
                   help="log throughput, running/waiting, KV use and cache hit rate every S seconds (0: off)")


def _scheduling_args(p: argparse.ArgumentParser) -> None:
    """Who runs first and where: fairness preemption, TTFT objectives, compute cores."""
    p.add_argument("--no-fairness-preemption", action="store_true",
                   help="never preempt a running request to give an under-served tenant its slot")
    p.add_argument("--no-fairness-slot-share", action="store_true",
                   help="preempt for fairness only on the counter gap, not also for a tenant holding "
                        "fewer than its weighted share of the slots in use")
    p.add_argument("--fairness-active-lead", type=float, default=DEFAULT_ACTIVE_LEAD, metavar="UNITS",
                   help="how far below the least-served waiting tenant a tenant served within the last "
                        "second starts, in cost units (a prompt token 1, an output token 2): a light "
                        "tenant's burst goes ahead of a flood's backlog; the fairness bound grows by this "
                        "much (0: level, the VTC paper's lift)")
    p.add_argument("--cpu-cores", default=None, metavar="LIST",
                   help="run the compute threads on these cores (e.g. 2-7; their count is the thread "
                        "count) and the event loop, tokenizer and the rest on the others; 'auto': all "
                        "but the first core where there are more than two")
    p.add_argument("--gc-threshold", type=parse_threshold, default=DEFAULT_THRESHOLD, metavar="G0,G1,G2",
                   help="Python's collector thresholds once the server is up (backends/collector.py): "
                        "the third, 100 against Python's 10, makes full collections, which stop the "
                        "process and every stream with it, ten times rarer")
    p.add_argument("--gil-switch-interval-ms", type=float, default=0.5, metavar="MS",
                   help="Python's GIL switch interval while the engine runs, at most this (Python's own: 5): "
                        "the engine thread gets the GIL back sooner from busy Python threads")
    p.add_argument("--ttft-objective", action="append", default=None, metavar="CLASS=SECONDS",
                   help="time-to-first-token objective of a priority class (default interactive=1.0; "
                        "'none': no objective): a request about to miss it goes first among tenants "
                        "the fair counters hold level")


def _eval_args(ev: argparse.ArgumentParser) -> None:
    ev.add_argument("--model", required=True)
    ev.add_argument("--baseline-model", default=None)
    ev.add_argument("--dtype", default="float32")
    ev.add_argument("--baseline-dtype", default="float32")
    ev.add_argument("--kv-cache-dtype", default=None, choices=KV_CHOICES,
                    help="KV cache of the candidate (default: its weights' dtype)")
    ev.add_argument("--baseline-kv-cache-dtype", default=None, choices=KV_CHOICES)
    ev.add_argument("--quantization", default=None, metavar="int8|int8-a8|int4[-gN]",
                    help="weight-only quantization of the candidate (load-time)")
    ev.add_argument("--baseline-quantization", default=None, metavar="int8|int4[-gN]")
    ev.add_argument("--speculative", default=None, metavar="ngram|draft:DIR",
                    help="decode the config side with speculative decoding, the baseline plain (both via the engine)")
    ev.add_argument("--num-speculative-tokens", type=int, default=4)
    ev.add_argument("--heldout", default=None, help="held-out text file for perplexity")
    ev.add_argument("--golden", default=None, help="golden set JSONL")
    ev.add_argument("--max-ppl-delta-pct", type=float, default=2.0)
    ev.add_argument("--max-pass-rate-drop", type=float, default=1.0, help="points")
    ev.add_argument("--min-greedy-agreement", type=float, default=None,
                    help="fail below this share of prompts with baseline-identical greedy output")
    ev.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ev.add_argument("--ctx", type=int, default=256, help="perplexity window in tokens")
    ev.add_argument("--max-heldout-tokens", type=int, default=None)
    ev.add_argument("--max-tokens", type=int, default=32, help="greedy tokens per prompt")
    ev.add_argument("--agreement-prompts", type=int, default=16,
                    help="held-out snippets added to the golden prompts for greedy agreement")
    ev.add_argument("--batch-size", type=int, default=8, help="sequences per forward pass")
    ev.add_argument("--progress", default="auto", choices=["auto", "on", "off"])
    ev.add_argument("-v", "--verbose", action="store_true", help="print each golden item's result")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    engine = sub.add_parser("engine", help="run the paged engine as an OpenAI-compatible server")
    _engine_args(engine)

    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", default=None, help="settings file (YAML or JSON)")
    serve.add_argument("--model", default=None, help="model folder of the embedded engine")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--log-level", default=None, choices=LOG_LEVELS,
                       help="default info: one line per request, engine stats (env FAIRGATE_LOG_LEVEL)")

    db = sub.add_parser("db", help="database migrations")
    db.add_argument("action", choices=["upgrade"])
    db.add_argument("--config", default=None)

    qz = sub.add_parser("quantize", help="write a weight-only quantized copy of a model folder")
    qz.add_argument("--model", required=True, help="Hugging Face model folder (float weights)")
    qz.add_argument("--out", required=True, help="folder to write (loadable by `fairgate engine`)")
    qz.add_argument("--method", required=True, metavar="int8|int8-a8|int4[-gN]",
                    help="int8 per output channel, or int4 with a scale per N inputs (default 64)")

    from fairgate.gateway.config.cli import add_commands  # apply / export

    add_commands(sub)
    from fairgate.gateway.observability.advise_cli import add_command as add_advise

    add_advise(sub)

    _eval_args(sub.add_parser("eval", help="compare an engine configuration against a baseline"))
    add_bench_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if "torch" not in sys.modules:  # (libgomp reads it when torch loads it)
        default_omp_wait()  # the compute threads' barrier spin, bounded (engine/cores.py)
    if args.command == "engine":
        from fairgate.backends.local.serving.server import run_engine_server

        return run_engine_server(args) or 0
    if args.command == "serve":
        from fairgate.gateway.serve import run_gateway

        return run_gateway(args) or 0
    if args.command == "db":
        from fairgate.gateway.store.db import run_db_command

        return run_db_command(args) or 0
    if args.command in ("apply", "export"):
        from fairgate.gateway.config import cli as declarative_cli

        return declarative_cli.run_apply(args) if args.command == "apply" else declarative_cli.run_export(args)
    if args.command == "advise":
        from fairgate.gateway.observability.advise_cli import run_advise

        return run_advise(args)
    if args.command == "quantize":
        from fairgate.backends.local.model.quantization import run_quantize

        return run_quantize(args)
    if args.command == "eval":
        from fairgate.backends.local.evaluation import run_eval

        return run_eval(args) or 0
    if args.command == "bench":
        from fairgate.gateway.loadgen.cli import run_bench

        return run_bench(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
