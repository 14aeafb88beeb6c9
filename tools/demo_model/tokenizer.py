"""Train the demo models' byte-level BPE tokenizer and write the tokenizer files of a folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

BOS, EOS, PAD = "<s>", "</s>", "<pad>"

# Role tags, content, EOS after each message; the tests' tiny models use this template too.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    # Tools (transformers' `tools`): listed in a system turn, called as Hermes <tool_call> JSON.
    "{% if tools %}"
    "<|system|>\nYou can call these tools. To call one, answer with "
    "<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}{{ eos_token }}\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' and message['tool_calls'] %}"
    "<|assistant|>\n{% for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": \"{{ call['function']['name'] }}\", \"arguments\": {{ call['function']['arguments'] }}}"
    "</tool_call>{% endfor %}{{ eos_token }}\n"
    "{% else %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _lines(text: str, chunk: int = 4096) -> Iterator[str]:
    for i in range(0, len(text), chunk):
        yield text[i: i + chunk]


def train_tokenizer(train_text: str, vocab_size: int):
    """Return a `tokenizers.Tokenizer`: byte-level BPE, encode() prepends BOS like Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_lines(train_text), trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tok


def write_tokenizer_files(tok, folder: Path, model_max_length: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
