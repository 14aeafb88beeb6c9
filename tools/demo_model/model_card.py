"""Write the README.md model cards of the demo target and draft from the training metrics.

    python -m tools.demo_model.model_card   # re-render from models/fairgate-demo/eval/metrics.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COMMAND = "python -m tools.demo_model.train --target-steps {target_schedule_steps} --draft-steps {draft_steps}"


def _cut(m: dict) -> str:
    if m.get("target_schedule_steps", m["target_steps"]) == m["target_steps"]:
        return ""
    return f"; stopped at step {m['target_steps']} of a {m['target_schedule_steps']}-step schedule"


def _command(m: dict) -> str:
    m = {"target_schedule_steps": m["target_steps"], **m}
    cmd = COMMAND.format(**m)
    return cmd + (f" --stop-after {m['target_steps']}" if _cut(m) else "")


def _arch_rows(arch: dict, m: dict) -> str:
    return "\n".join([
        f"| hidden size | {arch['hidden_size']} |",
        f"| layers | {arch['num_hidden_layers']} |",
        f"| attention heads / KV heads | {arch['num_attention_heads']} / {arch['num_key_value_heads']} |",
        f"| MLP intermediate size | {arch['intermediate_size']} |",
        f"| vocabulary | {m['vocab_size']} (byte-level BPE, shared by target and draft) |",
        f"| context | {m['ctx']} tokens |",
        "| embeddings | tied with the output layer |",
        "| stored dtype | bfloat16 (safetensors) |",
    ])


def _corpus(m: dict) -> str:
    c = m.get("corpus", {})
    return (
        "Built offline by `tools/demo_model/build_corpus.py` from what every machine with Python has:\n\n"
        f"- Python 3.11 standard library sources plus pydoc's topic documentation "
        f"({c.get('py_docs', '?')} documents, {c.get('py_bytes', 0) / 1e6:.1f} MB; tests, codecs "
        "tables and vendored packages left out);\n"
        f"- Turkish: the translated strings of the gettext catalogs under `/usr/share/locale/tr` "
        f"(libc, grep, sed, apt, glib, ...; {c.get('tr_docs', '?')} documents of up to 200 strings, "
        f"{c.get('tr_bytes', 0) / 1e6:.1f} MB).\n\n"
        "One document in 30 (by a hash of its name) is held out: "
        f"{m['train_tokens_corpus']:,} training tokens, {m['heldout_tokens']:,} held-out tokens. "
        "The held-out split is shipped as `eval/heldout.txt` in the target's folder."
    )


SAMPLE_PROMPTS = [
    "import os\nimport sys\n\n\ndef main(",
    "class Stack:\n    \"\"\"A last-in, first-out stack.\"\"\"\n\n    def __init__(self",
    "Dosya açılırken",
]


def _samples(m: dict) -> str:
    if not m.get("samples"):
        return ""
    blocks = "\n".join(f"```\n{s['prompt']}┃{s['completion']}\n```\n" for s in m["samples"])
    return (f"Greedy samples from fairgate's engine (prompt, then ┃, then the model's "
            f"{m['sample_tokens']} tokens):\n\n{blocks}\n")


def generate_samples(target_dir: Path, tokens: int = 48) -> list[dict]:
    """Greedy completions of SAMPLE_PROMPTS through fairgate's own runner."""
    from fairgate.backends.local.evaluation.harness import EngineOptions, Harness

    harness = Harness(EngineOptions(target_dir), max_seq_len=256, slots=len(SAMPLE_PROMPTS))
    outs = harness.greedy(SAMPLE_PROMPTS, [tokens] * len(SAMPLE_PROMPTS), [[] for _ in SAMPLE_PROMPTS])
    return [{"prompt": p, "completion": o.text} for p, o in zip(SAMPLE_PROMPTS, outs, strict=True)]


def target_card(m: dict) -> str:
    return f"""# fairgate-demo

A small Llama-architecture model trained by fairgate itself, on one CPU core in about
{m['train_minutes']:.0f} minutes (both models), so the gateway has a model to serve with no download.
It continues Python code and docstrings and has seen Turkish; it is a demo, not an assistant:
it was never instruction-tuned, and the chat template only wraps messages in role tags.

| | |
|---|---|
| parameters | {m['target_params']:,} |
{_arch_rows(m['target_arch'], m)}

## Corpus

{_corpus(m)}

## Training

{m['target_train_tokens']:,} tokens ({m['target_steps']} steps of {m['batch']} x {m['ctx']} tokens{_cut(m)}),
AdamW (betas 0.9/0.95, weight decay 0.1, gradient clip 1.0), learning rate {m['target_lr']} with
warmup and cosine decay to 10%, fp32 on CPU with one thread, seed {m['seed']}.
Reproduce: `{_command(m)}`.

## Evaluation (held-out split, weights as stored)

| model | held-out perplexity |
|---|---|
| unigram baseline (add-one smoothed training-split token frequencies) | {m['unigram_ppl']:.1f} |
| fairgate-demo-draft | {m['draft_ppl']:.2f} |
| **fairgate-demo** | **{m['target_ppl']:.2f}** |

Draft and target pick the same greedy next token on {m['greedy_agreement'] * 100:.1f}% of
held-out positions (the first {m['agreement_tokens']:,} held-out tokens): roughly the per-token
acceptance rate greedy speculative decoding with `fairgate-demo-draft` can expect.

{_samples(m)}`eval/golden.jsonl` is a small golden set (Python idioms and Turkish strings) for
`fairgate eval --model models/fairgate-demo` (which finds `eval/` by itself).

## Licences of the training text

The Python sources are under the PSF licence; the Turkish catalog strings are translations
shipped by Debian packages under those packages' licences (mostly GPL/LGPL).
"""


def draft_card(m: dict) -> str:
    if m.get("draft_distill"):
        return distilled_draft_card(m, m["draft_distill"])
    return f"""# fairgate-demo-draft

The draft model for speculative decoding with `fairgate-demo`: same tokenizer, same corpus,
{m['draft_params']:,} parameters (most of them the tied embedding table).

| | |
|---|---|
| parameters | {m['draft_params']:,} |
{_arch_rows(m['draft_arch'], m)}

Trained on {m['draft_train_tokens']:,} tokens ({m['draft_steps']} steps of {m['batch']} x {m['ctx']}),
learning rate {m['draft_lr']}, otherwise as the target (see `../fairgate-demo/README.md`).

| | held-out perplexity |
|---|---|
| unigram baseline | {m['unigram_ppl']:.1f} |
| fairgate-demo-draft | {m['draft_ppl']:.2f} |
| fairgate-demo (target) | {m['target_ppl']:.2f} |

Greedy next-token agreement with the target on held-out positions: {m['greedy_agreement'] * 100:.1f}%.
"""


def distilled_draft_card(m: dict, d: dict) -> str:
    a = d["data_args"]
    return f"""# fairgate-demo-draft

The draft model for speculative decoding with `fairgate-demo`: same tokenizer,
{d['params']:,} parameters (most of them the tied embedding table), distilled from the target's
own outputs so that its greedy guesses are the target's.

| | |
|---|---|
| parameters | {d['params']:,} |
{_arch_rows(d['arch'], m)}

## Distillation

`tools/demo_model/distill_data.py` took {d['sequences']:,} passages of the training split (never
the held-out one) and had the target continue each by {a.get('continuation', '?')} tokens
through fairgate's engine (greedy; one in {a.get('sampled_one_in', '?')} sampled at temperature
{a.get('temperature', '?')}), then scored the {d['data_tokens']:,} tokens with the target: its top
{a.get('top_k', '?')} next tokens and their log-probabilities at every position.
`tools/demo_model/distill.py` trained the draft on those sequences: cross-entropy on the
target's argmax plus {d['soft_weight']} x cross-entropy on its renormalised top-{a.get('top_k', '?')}
distribution; the tied embedding started as the target's projected on its first
{d['arch']['hidden_size']} principal directions. {d['steps']} steps ({d['epochs']} epochs, batches of
{d['batch']} sequences of similar length), AdamW with warmup and cosine decay from {d['lr']},
fp32, one thread, seed {d['seed']}.
CPU time: {d['data_cpu_minutes']:.0f} minutes for the data, {d['train_cpu_minutes']:.0f} for training.
Reproduce: `python -m tools.demo_model.distill_data && python -m tools.demo_model.distill`.

## Evaluation (weights as stored)

| | held-out perplexity |
|---|---|
| unigram baseline | {m['unigram_ppl']:.1f} |
| fairgate-demo-draft | {d['heldout_ppl']:.2f} |
| fairgate-demo (target) | {m['target_ppl']:.2f} |

The perplexity is worse than the unigram baseline's, and that is the trade: the draft learnt
the target's top {a.get('top_k', '?')} choices only, so a token outside them gets almost no
probability. It is a proposer, not a language model; what it is for is the next figure.

Greedy next-token agreement with the target: {d['heldout_agreement'] * 100:.1f}% of held-out
positions (the first {d['agreement_tokens']:,} held-out tokens; the first draft, trained on the
corpus alone, had 29.4%), and {d['continuation_agreement'] * 100:.1f}% of the positions of the
target's own greedy continuations of {d['continuation_passages']} held-out passages
({d['continuation_tokens']} tokens each): the per-token acceptance greedy speculative decoding sees.
{_acceptance(d)}"""


def _acceptance(d: dict) -> str:
    bench = d.get("bench")
    if not bench:
        return ""
    return (f"\n`bench/spec_decode.py` (free chat, batch 1): acceptance {bench['acceptance_draft']:.2f}, "
            f"{bench['draft_speedup_bs1']:.2f}x the plain engine's tokens/s (one run, CPU time, on a shared "
            f"two-core machine at load average {bench.get('load', '?')}).\n")


def record_distilled_draft(target_dir: Path, draft_dir: Path, info: dict) -> None:
    """Put a distilled draft's figures into the pair's metrics.json and rewrite both cards."""
    path = target_dir / "eval" / "metrics.json"
    m = json.loads(path.read_text())
    m.update(draft_params=info["params"], draft_ppl=info["heldout_ppl"], draft_arch=info["arch"],
             greedy_agreement=info["heldout_agreement"], draft_distill=info)
    path.write_text(json.dumps(m, indent=2, ensure_ascii=False) + "\n")
    write_cards(target_dir, draft_dir, m)


def write_cards(target_dir: Path, draft_dir: Path, m: dict) -> None:
    (target_dir / "README.md").write_text(target_card(m), encoding="utf-8")
    (draft_dir / "README.md").write_text(draft_card(m), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", type=Path, default=Path("models/fairgate-demo"))
    ap.add_argument("--draft", type=Path, default=Path("models/fairgate-demo-draft"))
    ap.add_argument("--samples", action="store_true", help="(re)generate the card's greedy samples")
    args = ap.parse_args()
    path = args.target / "eval" / "metrics.json"
    metrics = json.loads(path.read_text())
    if args.samples:
        metrics["sample_tokens"] = 48
        metrics["samples"] = generate_samples(args.target, metrics["sample_tokens"])
        path.write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    write_cards(args.target, args.draft, metrics)


if __name__ == "__main__":
    main()
