"""Same-run peers for bench/quantization.py: `fairgate engine` with int8 weights (weight-only and
int8-a8) against vLLM's CPU build (float32) and, when given, llama.cpp's server, on the same
110M model folder, each driven over HTTP at batch 1, 16 and 64.

One client for the engine and vLLM (`bench_openai_server.py`, bench/server_peers.py): token-id
prompts of `--peer-prompt` tokens, `--peer-out` generated tokens each with `ignore_eos`
(decode-heavy), `--max-concurrency` = the batch size. The servers take turns, batch by batch and
round by round, so a busy spell on this shared machine lands on all of them; tokens/s are by
wall time (a server's work is spread over processes), so they are noisier than the in-process
CPU-time figures. vLLM starts once (about two minutes of compiling) and serves every batch.
llama.cpp (`--llama-cpp DIR`, bench/llamacpp_peer.py) runs its f32 GGUF with N slots; without
a built llama-server it is skipped and the JSON says why.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from pathlib import Path

from bench import server_peers

BATCHES = (1, 16, 64)
ENGINE_WEIGHTS = ("int8", "int8-a8")
MAX_SEQS = 64
STEP_TOKENS = 512  # both servers' per-step token budget


@dataclass(slots=True)
class PeerReq:
    """One request as bench/llamacpp_peer.py sends it."""

    prompt: list[int]
    max_tokens: int


def requests_for(batch: int) -> int:
    """Enough requests that the batch stays full for most of the pass (1: four in a row)."""
    return max(4, batch)


def client_args(batch: int, args: argparse.Namespace) -> tuple[str, ...]:
    p, o = args.peer_prompt, args.peer_out
    return ("--max-concurrency", str(batch), "--prompt-range", f"{p},{p}", "--out-range", f"{o},{o}")


def key_of(weights: str) -> str:
    return "engine_" + weights.replace("-", "")


def llama_cpp_part(model: Path, args: argparse.Namespace, threads: int) -> dict:
    """llama.cpp tokens/s per batch, or {"skipped": reason}."""
    from bench import llamacpp_peer

    if not args.llama_cpp:
        return {"skipped": "no --llama-cpp DIR given"}
    try:
        llamacpp_peer.server_binary(Path(args.llama_cpp))
    except FileNotFoundError as exc:
        return {"skipped": str(exc)}
    out: dict = {}
    for bs in BATCHES:
        reqs = [PeerReq([3 + (i * 7 + j) % 997 for j in range(args.peer_prompt)], args.peer_out)
                for i in range(requests_for(bs))]
        warm = [PeerReq([5] * 16, 4) for _ in range(2)]
        out[f"bs{bs}"] = round(llamacpp_peer.run(Path(args.llama_cpp), model, reqs, warm, threads, slots=bs,
                                                 kv_type="f32"), 2)
        print(f"  llama.cpp batch {bs}: {out[f'bs{bs}']:.1f} tok/s", flush=True)
    return out


def peers_part(model: Path, args: argparse.Namespace, tmp: Path, threads: int) -> dict:
    """Tokens/s of each server at each batch (mean over `--peer-rounds` alternating passes)."""
    blocks = MAX_SEQS * -(-(args.peer_prompt + args.peer_out + 2) // 16) + 64
    vocab = 32000
    with contextlib.ExitStack() as stack:
        servers: dict[str, server_peers.Server] = {}
        for w in ENGINE_WEIGHTS:
            servers[key_of(w)] = stack.enter_context(server_peers.running(server_peers.start_engine(
                model, blocks, MAX_SEQS, STEP_TOKENS, args.threads or None, tmp / f"engine-{w}.log",
                ("--quantization", w))))
        if args.vllm:
            servers["vllm"] = stack.enter_context(server_peers.running(server_peers.start_vllm(
                Path(args.vllm), model, MAX_SEQS, STEP_TOKENS, tmp / "vllm.log")))
        passes: dict[str, list[float]] = {}
        for bs in BATCHES:
            for _ in range(args.peer_rounds):
                for name, server in servers.items():
                    r = server_peers.drive(server, requests_for(bs), False, vocab, client_args(bs, args))
                    passes.setdefault(f"{name}_bs{bs}", []).append(round(r["tokens_per_s"], 2))
            print(f"  batch {bs}: " + ", ".join(f"{n} {passes[f'{n}_bs{bs}']} tok/s" for n in servers), flush=True)
    rates = {k: round(sum(v) / len(v), 2) for k, v in passes.items()}
    out: dict = {"tokens_per_s": rates, "passes": passes, "prompt": args.peer_prompt, "out": args.peer_out,
                 "rounds": args.peer_rounds, "clock": "wall", "vllm": "float32" if args.vllm else "not run (no --vllm)"}
    out["llama_cpp"] = llama_cpp_part(model, args, threads)
    return out


def peer_summary(peers: dict) -> dict:
    """engine_int8_vs_vllm_bs1 etc. (and _vs_llamacpp_ when it ran)."""
    rates, llama = peers["tokens_per_s"], peers["llama_cpp"]
    out = {}
    for w in ENGINE_WEIGHTS:
        for bs in BATCHES:
            mine = rates[f"{key_of(w)}_bs{bs}"]
            if f"vllm_bs{bs}" in rates:
                out[f"{key_of(w)}_vs_vllm_bs{bs}"] = round(mine / rates[f"vllm_bs{bs}"], 3)
            if f"bs{bs}" in llama:
                out[f"{key_of(w)}_vs_llamacpp_bs{bs}"] = round(mine / llama[f"bs{bs}"], 3)
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--vllm", default=None, metavar="VENV", help="vLLM CPU venv: serve the model as a peer")
    ap.add_argument("--llama-cpp", default=None, metavar="DIR", help="llama.cpp tree with a built llama-server")
    ap.add_argument("--peers", action="store_true", help="run the server part (implied by --vllm / --llama-cpp)")
    ap.add_argument("--peer-prompt", type=int, default=64, help="prompt tokens per request")
    ap.add_argument("--peer-out", type=int, default=128, help="generated tokens per request")
    ap.add_argument("--peer-rounds", type=int, default=1, help="alternating passes per server and batch")
    ap.add_argument("--skip-kv", action="store_true", help="skip the KV-cache part")
