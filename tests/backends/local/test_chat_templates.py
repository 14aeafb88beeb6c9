"""Chat templates rendered as transformers renders them: loop controls, the generation tag,
raise_exception, tools and tool messages, on the tokenizer of every supported family."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fairgate.backends.local.model.tokenizer import Tokenizer
from fairgate.backends.local.serving.prepare import ModelInfo, parse_for_engine

transformers = pytest.importorskip("transformers")

TEMPLATES = {
    # Llama-3 style: system first, header ids, loop.first
    "llama3": (
        "{{ bos_token }}{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
        "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>{% endif %}"
        "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"),
    # Mistral style: strict alternation enforced with raise_exception
    "mistral": (
        "{{ bos_token }}{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]{% else %}{{ m['content'] }}{{ eos_token }}"
        "{% endif %}{% endfor %}"),
    # Qwen2 / Hermes style with tools, tool calls and tool results
    "qwen2-tools": (
        "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}"
        "\n</tools><|im_end|>\n{% endif %}{% for m in messages %}"
        "{% if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant\n{% for c in m.tool_calls %}"
        "<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments }}}\n</tool_call>"
        "{% endfor %}<|im_end|>\n{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}"
        "\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    # loop controls and the generation tag (templates written for assistant masks)
    "controls": (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% if loop.index > 6 %}{% break %}{% endif %}{% if m.role == 'assistant' %}{% generation %}"
        "A: {{ m.content }}{{ eos_token }}{% endgeneration %}{% else %}U: {{ m.content }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}A:{% endif %}"),
}

TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CALL = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Izmir"}'}}]
CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Weather?"}],
    [{"role": "user", "content": "Weather in Izmir?"}, {"role": "assistant", "content": "", "tool_calls": CALL},
     {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
]


def folder_with(template: str, base: Path, tmp_path: Path) -> Path:
    d = tmp_path / "m"
    shutil.copytree(base, d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["chat_template"] = template
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("family", ["tiny_model_dir", "tiny_mistral_dir", "tiny_qwen2_dir"])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_rendering_equals_transformers(family: str, name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    d = folder_with(TEMPLATES[name], request.getfixturevalue(family), tmp_path)
    ours = Tokenizer(d)
    theirs = transformers.AutoTokenizer.from_pretrained(d)
    for conv in CONVERSATIONS:
        for tools in (None, TOOLS):
            try:
                expected = theirs.apply_chat_template(conv, tools=tools, tokenize=False, add_generation_prompt=True)
            except Exception as exc:  # noqa: BLE001 - a template refusal must be ours too
                with pytest.raises(ValueError, match=str(exc)[:30].replace("(", r"\(").replace(")", r"\)")):
                    ours.apply_chat_template(conv, tools=tools)
                continue
            assert ours.apply_chat_template(conv, tools=tools) == expected, (name, conv, tools)


def test_tool_history_and_developer_reach_the_template(tiny_qwen2_dir: Path, tmp_path: Path) -> None:
    d = folder_with(TEMPLATES["qwen2-tools"], tiny_qwen2_dir, tmp_path)
    tok = Tokenizer(d)
    info = ModelInfo("m", 512, tok)
    conv = [{"role": "developer", "content": "Use tools."}, *CONVERSATIONS[2]]
    ids = parse_for_engine("chat", {"messages": conv, "max_tokens": 4}, info).prompt_token_ids
    text = tok.decode(ids, skip_special_tokens=False)
    assert "<|im_start|>system\nUse tools." in text and "<tool_response>\nsunny" in text
    assert '"name": "weather", "arguments": {"city": "Izmir"}' in text


def test_qwen3_template_with_thinking_switch_and_history_renders_as_transformers(tmp_path: Path) -> None:
    """Issue 38: Qwen3's published template (tests/fixtures/qwen3_chat_template.jinja) with
    `enable_thinking` both ways, tools, tool results and earlier thinking in the history."""
    from tests.helpers.scripted_model import make_scripted_model

    d = make_scripted_model(tmp_path / "q3", {"\n": "<think>"})
    ours, theirs = Tokenizer(d), transformers.AutoTokenizer.from_pretrained(d)
    history = [{"role": "user", "content": "2+2?"},
               {"role": "assistant", "content": "4", "reasoning_content": "two and two"},
               {"role": "user", "content": "and 3+3?"}]
    for conv in [*CONVERSATIONS, history, [*history, {"role": "assistant", "content": "<think>\nsix\n</think>\n\n6"}]]:
        for tools in (None, TOOLS):
            for extra in ({}, {"enable_thinking": False}, {"enable_thinking": True}):
                expected = theirs.apply_chat_template(conv, tools=tools, tokenize=False, add_generation_prompt=True,
                                                      **extra)
                assert ours.apply_chat_template(conv, tools=tools, **extra) == expected, (conv, tools, extra)
    info = ModelInfo("m", 512, ours)
    body = {"messages": history, "max_tokens": 4, "chat_template_kwargs": {"enable_thinking": False}}
    text = ours.decode(parse_for_engine("chat", body, info).prompt_token_ids, skip_special_tokens=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "<think>\ntwo and two\n</think>" not in text  # thinking before the last question is dropped
