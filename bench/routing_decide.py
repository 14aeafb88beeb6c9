"""Cost of one routing decision (`gateway.request.routing.Router.decide`): classify the request body,
score complexity, evaluate the rules. No network: backends are real objects never called.

Cases: a short chat turn, a 4 KB prompt, a 32 KB prompt with one IBAN, each for model "auto"
against 20 rules (so the complexity score runs and every rule is evaluated); and the 4 KB prompt
for a named model (no complexity score). Prints a table, then one JSON line.

    python bench/routing_decide.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

import httpx  # noqa: E402

from fairgate.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from fairgate.gateway.request.routing import Router, RouteRequest  # noqa: E402
from fairgate.policies.routing import Rule, RuleMatch  # noqa: E402

SENTENCE = "Geçen haftaki toplantıda ürün yol haritasını ve üçüncü çeyrek hedeflerini konuştuk. "


def make_router() -> Router:
    client = httpx.AsyncClient()
    backends = {f"b{i}": OpenAICompatBackend(f"b{i}", "http://127.0.0.1:9/v1", client, is_local=i % 2 == 0)
                for i in range(6)}
    rules = [Rule(f"r{i}", RuleMatch(tenant=f"other-{i}", sensitivity="public"), "b1", ("b3",)) for i in range(18)]
    rules.append(Rule("auto-small", RuleMatch(model="auto", max_complexity=0.3, sensitivity="public"), "b1"))
    rules.append(Rule("catch-all", RuleMatch(), "b0", ("b2",)))
    return Router(backends, rules=rules)


def body_of(text: str, model: str) -> dict:
    return {"model": model, "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": text}]}


def measure(router: Router, text: str, repeat: int, model: str = "auto") -> float:
    req = RouteRequest(tenant_id="t", tenant_name="acme", model=model, priority="standard",
                       texts=[text], body=body_of(text, model))
    # decide is a coroutine without awaits inside on this path: drive it by hand, so the
    # number is the decision's own cost and not an event loop's
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        coro = router.decide(req)
        try:
            coro.send(None)
        except StopIteration:
            pass
        best = min(best, time.thread_time() - t0)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    router = make_router()
    cases = {
        "short_chat": "Merhaba, bu cümleyi İngilizceye çevirir misin?",
        "prompt_4kb": SENTENCE * (4096 // len(SENTENCE.encode())),
        "prompt_32kb_with_iban": SENTENCE * 200 + " IBAN TR33 0006 1005 1978 6457 8413 26 " + SENTENCE * 150,
    }
    results = {name: measure(router, text, args.repeat) for name, text in cases.items()}
    cases["prompt_4kb_named_model"] = cases["prompt_4kb"]  # no complexity score needed
    results["prompt_4kb_named_model"] = measure(router, cases["prompt_4kb"], args.repeat, "chat")
    print(f"{'case':<24}{'KB':>8}{'µs/decide':>12}")
    for name, us in results.items():
        print(f"{name:<24}{len(cases[name].encode()) / 1024:>8.1f}{us:>12.1f}")
    print(json.dumps({"bench": "routing_decide", "rules": len(router.rules),
                      "us_per_decide": {k: round(v, 1) for k, v in results.items()}}))


if __name__ == "__main__":
    main()
