"""Sampling controls and logprobs on a real `fairgate engine` process, driven by the openai SDK,
httpx and lm-eval's `local-completions` model; logprobs checked against transformers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest
import torch

transformers = pytest.importorskip("transformers")
DATA = Path(__file__).parent / "data" / "tiny_mc.jsonl"


@pytest.fixture(scope="module")
def hf(tiny_model_dir: Path):
    return transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def hf_logprobs(hf, ids: list[int]) -> torch.Tensor:
    """[len(ids), V]: log-softmax of the logits at each position (predicting the next token)."""
    with torch.no_grad():
        return torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), dim=-1)


def test_greedy_logprobs_with_echo_equal_transformers(client: openai.OpenAI, hf, tiny_model_dir: Path) -> None:
    prompt = [1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]  # > one chunk
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0, logprobs=3, echo=True,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(prompt) + 6 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    gen = r.choices[0].logprobs.tokens[len(prompt):]
    assert len(gen) == 6 and r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == 6
    full = hf_logprobs(hf, prompt)  # prompt tokens: positions 1..
    for pos in range(1, len(prompt)):
        assert abs(lp.token_logprobs[pos] - full[pos - 1, prompt[pos]].item()) < 1e-4
    # The generated tokens are transformers' greedy ones, and their logprobs the model's own.
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        greedy = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             do_sample=False, max_new_tokens=6, pad_token_id=0)[0].tolist()
    ref = hf_logprobs(hf, greedy)
    for j, token_id in enumerate(greedy[len(prompt):]):
        assert gen[j] == tok.decode([token_id])
        assert abs(lp.token_logprobs[len(prompt) + j] - ref[len(prompt) + j - 1, token_id].item()) < 1e-4
    assert all(len(t) >= 1 for t in lp.top_logprobs[1:])


def test_chat_logprobs_and_top_logprobs(client: openai.OpenAI, hf, tiny_model_dir: Path) -> None:
    msgs = [{"role": "user", "content": "Hello world"}]
    r = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=4, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 5 and all(len(c.top_logprobs) == 4 for c in content)
    assert all(c.top_logprobs[0].logprob == pytest.approx(c.logprob, abs=1e-6) for c in content)  # greedy = best
    from fairgate.backends.local.model.tokenizer import Tokenizer

    ids = Tokenizer(tiny_model_dir).encode_chat(msgs)
    ref = hf_logprobs(hf, ids)
    assert abs(content[0].logprob - ref[-1].max().item()) < 1e-4


def test_logit_bias_forces_and_forbids(client: openai.OpenAI, hf, tiny_model_dir: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt = tok("The quick brown fox").input_ids
    args = dict(model="tiny", prompt=prompt, max_tokens=4, temperature=0, logprobs=0, extra_body={"ignore_eos": True})
    forced = client.completions.create(**args, logit_bias={"77": 100})
    assert forced.choices[0].logprobs.tokens == [tok.decode([77])] * 4
    assert forced.choices[0].logprobs.token_logprobs[0] > -1e-3  # ~probability 1 after the bias
    ranked = hf_logprobs(hf, prompt)[-1].argsort(descending=True).tolist()
    plain = client.completions.create(**args)
    assert plain.choices[0].logprobs.tokens[0] == tok.decode([ranked[0]])
    banned = client.completions.create(**args, logit_bias={str(ranked[0]): -100})
    assert banned.choices[0].logprobs.tokens[0] == tok.decode([ranked[1]])  # the runner-up wins


def test_penalties_change_greedy_output_and_min_tokens_holds(client: openai.OpenAI) -> None:
    args = dict(model="tiny", prompt="Hello world", max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    plain = client.completions.create(**args).choices[0].text
    for extra in ({"frequency_penalty": 2.0}, {"presence_penalty": 2.0},
                  {"extra_body": {"ignore_eos": True, "repetition_penalty": 2.0}}):
        penalised = client.completions.create(**{**args, **extra}).choices[0].text
        assert penalised != plain, extra
    again = client.completions.create(**{**args, "extra_body": {"ignore_eos": True, "min_p": 0.5}}).choices[0].text
    assert again == plain  # min_p never removes the greedy token
    r = client.completions.create(model="tiny", prompt="Hello", max_tokens=8, temperature=0,
                                  logit_bias={"1": 100}, extra_body={"min_tokens": 5})
    assert r.usage.completion_tokens == 6 and r.choices[0].finish_reason == "stop"  # eos (id 1) once allowed


@pytest.mark.parametrize(
    ("path", "extra", "param"),
    [
        ("/v1/completions", {"logprobs": 21}, "logprobs"),
        ("/v1/completions", {"logprobs": "2"}, "logprobs"),
        ("/v1/completions", {"echo": "yes"}, "echo"),
        ("/v1/chat/completions", {"logprobs": 1}, "logprobs"),
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/completions", {"presence_penalty": 2.5}, "presence_penalty"),
        ("/v1/completions", {"frequency_penalty": "x"}, "frequency_penalty"),
        ("/v1/completions", {"repetition_penalty": 0}, "repetition_penalty"),
        ("/v1/completions", {"logit_bias": {"5": 101}}, "logit_bias"),
        ("/v1/completions", {"logit_bias": {"abc": 1}}, "logit_bias"),
        ("/v1/completions", {"logit_bias": {"99999": 1}}, "logit_bias"),
        ("/v1/completions", {"logit_bias": [1]}, "logit_bias"),
        ("/v1/completions", {"min_p": 1.5}, "min_p"),
        ("/v1/completions", {"min_tokens": -1}, "min_tokens"),
        ("/v1/completions", {"min_tokens": 50, "max_tokens": 4}, "min_tokens"),
        ("/v1/completions", {"guided_grammar": "root ::= \"x\""}, "guided_grammar"),
    ],
)
def test_bad_sampling_fields_are_400(server: str, path: str, extra: dict, param: str) -> None:
    base = {"model": "tiny", "max_tokens": 4}
    base.update({"prompt": "Hi"} if path == "/v1/completions" else {"messages": [{"role": "user", "content": "Hi"}]})
    r = httpx.post(server + path, json={**base, **extra}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]
    assert httpx.get(server + "/stats").json()["running"] == 0


def test_streamed_logprobs_match_non_streamed(client: openai.OpenAI) -> None:
    args = dict(model="tiny", prompt="The quick", max_tokens=6, temperature=0, logprobs=2,
                extra_body={"ignore_eos": True})
    whole = client.completions.create(**args).choices[0].logprobs
    tokens, lps = [], []
    for c in client.completions.create(**args, stream=True):
        if c.choices and c.choices[0].logprobs:
            tokens += c.choices[0].logprobs.tokens
            lps += c.choices[0].logprobs.token_logprobs
    assert tokens == whole.tokens and lps == pytest.approx(whole.token_logprobs, abs=1e-6)


def test_lm_eval_loglikelihood_equals_transformers(server: str, hf, tiny_model_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tiny_mc.yaml").write_text(json.dumps({
        "task": "fairgate_tiny_mc", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(DATA)}},
        "output_type": "multiple_choice", "test_split": "test", "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_choice": "choices", "doc_to_target": "answer", "metric_list": [{"metric": "acc"}],
    }))
    results = lm_eval.simple_evaluate(
        model="local-completions",
        model_args=f"base_url={server}/v1/completions,model=tiny,tokenizer={tiny_model_dir},"
                   "tokenizer_backend=huggingface,num_concurrent=1,max_retries=1",
        tasks=["fairgate_tiny_mc"], task_manager=TaskManager(include_path=str(tmp_path / "tasks")),
        log_samples=True, batch_size=1,
    )
    samples = results["samples"]["fairgate_tiny_mc"]
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    docs = [json.loads(line) for line in DATA.read_text().splitlines()]
    assert len(samples) == len(docs)
    checked = 0
    for sample in samples:
        # What lm-eval scored: (context, target_delimiter + choice) per choice.
        pairs = [tuple(a) for a in sample["arguments"].values()] if isinstance(sample["arguments"], dict) \
            else [tuple(a) for a in sample["arguments"]]
        assert [cont.strip() for _, cont in pairs] == [c.strip() for c in sample["doc"]["choices"]]
        for (context, continuation), resp in zip(pairs, sample["resps"], strict=True):
            # lm-eval encodes without special tokens (no BOS) and splits the whole sequence
            ctx = tok(context, add_special_tokens=False).input_ids
            whole = tok(context + continuation, add_special_tokens=False).input_ids
            cont = whole[len(ctx):]
            ref = hf_logprobs(hf, whole)
            expected = sum(ref[len(ctx) - 1 + j, t].item() for j, t in enumerate(cont))
            assert abs(_first_float(resp) - expected) < 1e-4, (continuation, resp, expected)
            checked += 1
    assert checked == 12


def _first_float(resp) -> float:
    """lm-eval nests a request's (loglikelihood, is_greedy) inside lists; take the loglikelihood."""
    while isinstance(resp, list | tuple):
        resp = resp[0]
    return float(resp)
