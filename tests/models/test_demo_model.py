"""The committed demo model pair: what the loader needs is there, the target has learned its
corpus (held-out perplexity far below a unigram model's), the draft agrees with it often enough
to be worth speculating with, and `fairgate eval` passes it against itself on its own eval set.
Everything runs through fairgate's model runner, not transformers."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from fairgate.backends.local.evaluation.golden import load_golden
from fairgate.backends.local.evaluation.harness import EngineOptions, Harness
from fairgate.backends.local.model.tokenizer import Tokenizer
from fairgate.gateway.cli import main

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "models" / "fairgate-demo"
DRAFT = ROOT / "models" / "fairgate-demo-draft"
HELDOUT_TOKENS = 2048  # enough for a stable estimate, small enough to run in seconds
CTX = 256


@pytest.fixture(scope="module")
def heldout_windows() -> list[list[int]]:
    text = (TARGET / "eval" / "heldout.txt").read_text(encoding="utf-8")
    harness_tok = Tokenizer(TARGET)
    ids = harness_tok.encode(text[: HELDOUT_TOKENS * 8])[: HELDOUT_TOKENS + 1]
    return [ids[s: s + CTX + 1] for s in range(0, len(ids) - 1, CTX)]


@pytest.fixture(scope="module")
def target() -> Harness:
    return Harness(EngineOptions(TARGET), max_seq_len=CTX + 1, slots=8)


@pytest.mark.parametrize("folder", [TARGET, DRAFT])
def test_folder_has_what_the_loader_needs(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
    for name in ("model.safetensors", "tokenizer.json", "generation_config.json", "README.md"):
        assert (folder / name).is_file(), name
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert (tok_config["bos_token"], tok_config["eos_token"]) == ("<s>", "</s>")
    tok = Tokenizer(folder)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Merhaba"}])
    assert prompt == "<s><|user|>\nMerhaba</s>\n<|assistant|>\n"
    assert tok.eos_token_id == config["eos_token_id"]


def test_pair_shares_a_tokenizer_and_fits_the_size_budget() -> None:
    assert (TARGET / "tokenizer.json").read_bytes() == (DRAFT / "tokenizer.json").read_bytes()
    size = sum(p.stat().st_size for d in (TARGET, DRAFT) for p in d.rglob("*") if p.is_file())
    assert size < 25 * 2**20


def test_heldout_perplexity_is_far_below_unigram(target: Harness, heldout_windows: list[list[int]]) -> None:
    nll, count = target.nll(heldout_windows)
    ppl = math.exp(nll / count)
    # The card's baseline: a unigram model of the training split, scored on all held-out text.
    unigram = json.loads((TARGET / "eval" / "metrics.json").read_text())["unigram_ppl"]
    # A unigram model fitted on the very tokens it is scored on: a much stronger baseline.
    labels = [t for w in heldout_windows for t in w[1:]]
    freq = Counter(labels)
    oracle = math.exp(-sum(math.log(freq[t] / len(labels)) for t in labels) / len(labels))
    print(f"demo target held-out perplexity {ppl:.2f}, unigram {unigram:.1f}, oracle unigram {oracle:.1f}")
    assert ppl < unigram / 5 and ppl < oracle / 2


def test_draft_agrees_with_target_on_many_greedy_tokens(
    target: Harness, heldout_windows: list[list[int]]
) -> None:
    draft = Harness(EngineOptions(DRAFT), max_seq_len=CTX + 1, slots=8)
    same = total = 0
    for (t_logits, _), (d_logits, _) in zip(target.window_logits(heldout_windows),
                                            draft.window_logits(heldout_windows), strict=True):
        same += int((t_logits.argmax(-1) == d_logits.argmax(-1)).sum())
        total += t_logits.shape[0]
    print(f"draft/target greedy next-token agreement {same / total:.3f} over {total} positions")
    assert same / total > 0.3


def test_golden_set_has_turkish_and_every_kind() -> None:
    items = load_golden(TARGET / "eval" / "golden.jsonl")
    assert {i.kind for i in items} == {"exact", "regex", "json_schema"}
    assert any(set(i.prompt) & set("çğıöşüÇĞİÖŞÜ") for i in items)


def test_eval_of_the_demo_model_against_itself(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "--model", str(TARGET), "--progress", "off", "--max-heldout-tokens", "1024",
                 "--agreement-prompts", "2", "--max-tokens", "12", "--min-greedy-agreement", "1"])
    m = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert m["perplexity_delta_pct"] == 0.0 and m["greedy_agreement"] == 1.0
    assert 0 < m["pass_rate"] == m["baseline_pass_rate"]
