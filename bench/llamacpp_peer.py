"""llama.cpp's server as a peer in bench/engine_throughput.py: the same random model, converted
to GGUF, served with N parallel slots, driven with the same token-id workload.

Nothing here downloads or builds llama.cpp; give a source tree (for `convert_hf_to_gguf.py`
and `gguf-py`) and a built `llama-server`:

    cmake -S LLAMA -B LLAMA/build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
    cmake --build LLAMA/build --target llama-server -j
    python bench/engine_throughput.py --llama-cpp LLAMA

The bench model's word-level tokenizer has no llama.cpp counterpart, so the GGUF gets a plain
list of the same pieces; prompts go in as token ids, which is what the bench sends anyway.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

_CONVERT = """
import runpy, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/gguf-py"]
from conversion import llama

def set_vocab(self):  # the bench tokenizer's pieces "w0".."wN" as a plain sentencepiece-style list
    n = self.hparams["vocab_size"]
    w = self.gguf_writer
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([f"w{i}".encode() for i in range(n)])
    w.add_token_scores([0.0] * n)
    w.add_token_types([1] * n)  # normal tokens
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

llama.LlamaModel.set_vocab = set_vocab
sys.argv = ["convert_hf_to_gguf.py", sys.argv[2], "--outtype", "f32", "--outfile", sys.argv[3]]
runpy.run_path(root + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def convert(llama_dir: Path, model_dir: Path, out: Path) -> Path:
    """HF folder -> f32 GGUF with llama.cpp's own converter."""
    done = subprocess.run([sys.executable, "-c", _CONVERT, str(llama_dir), str(model_dir), str(out)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"GGUF conversion failed: {done.stderr[-800:]}")
    return out


def server_binary(llama_dir: Path) -> Path:
    for candidate in (llama_dir / "build" / "bin" / "llama-server", llama_dir / "llama-server"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"no built llama-server under {llama_dir} (see this module's docstring)")


async def _drive(url: str, reqs: list, timeout: float) -> tuple[float, int]:
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:

        async def one(r) -> int:
            body = {"prompt": r.prompt, "n_predict": r.max_tokens, "ignore_eos": True, "temperature": 0.0,
                    "cache_prompt": False}
            resp = await client.post("/completion", json=body)
            resp.raise_for_status()
            return int(resp.json()["tokens_predicted"])

        t = time.perf_counter()
        counts = await asyncio.gather(*(one(r) for r in reqs))
        return time.perf_counter() - t, sum(counts)


def run(llama_dir: Path, model_dir: Path, reqs: list, warm: list, threads: int, slots: int = 16,
        kv_type: str = "f16") -> float:
    """Generated tokens per second of llama-server on `reqs` (after `warm`)."""
    gguf = convert(llama_dir, model_dir, model_dir / "model-f32.gguf")
    ctx_per_slot = max(len(r.prompt) + r.max_tokens for r in reqs) + 16
    port = _free_port()
    cmd = [str(server_binary(llama_dir)), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "-t", str(threads), "-tb", str(threads), "-np", str(slots), "-c", str(ctx_per_slot * slots),
           "-ctk", kv_type, "-ctv", kv_type, "-ngl", "0"]
    log = (model_dir / "llama-server.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        asyncio.run(_drive(url, warm, 600))
        wall, generated = asyncio.run(_drive(url, reqs, 3600))
        expected = sum(r.max_tokens for r in reqs)
        if generated != expected:
            raise RuntimeError(f"llama-server generated {generated} tokens, expected {expected}")
        return generated / wall
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}; see its log")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("llama-server did not become healthy")
