from __future__ import annotations

from fairgate.policies.request_texts import inspectable_texts
from fairgate.policies.sensitivity import classify_parts


def test_collects_every_user_string_in_order() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                   "function": {"name": "lookup", "arguments": '{"tc": "10000000146"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "found"}]},
        ],
        "user": "ali@firma.com",
        "metadata": {"ref": 10000000146},
        "stream": True,
    }
    texts, opaque = inspectable_texts(body)
    assert not opaque
    contents = ["be brief", "c1", "lookup", '{"tc": "10000000146"}', "c1", "found", "ali@firma.com", "10000000146"]
    assert texts[:len(contents)] == contents  # the body's texts in order
    # then what is sent besides: protocol-word values and keys that are not the API's own
    assert texts[len(contents):] == ["m", "system", "assistant", "function", "tool", "text", "ref"]
    assert classify_parts(texts).kinds == ("email", "tckn")


def test_message_contents_stay_adjacent_for_split_values() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "TC 100000"},
                                        {"role": "user", "content": "00146 tamam"}]}
    texts, _ = inspectable_texts(body)
    assert texts == ["TC 100000", "00146 tamam", "m", "user", "user"]  # contents first, adjacent
    assert classify_parts(texts).kinds == ("tckn",)


def test_data_bearing_keys_are_collected() -> None:
    texts, _ = inspectable_texts({"metadata": {"ali@firma.com": "x", "plain": "y"}})
    assert texts == ["ali@firma.com", "x", "y", "plain"]  # a key with '@' in place; others after


def test_what_is_sent_is_read_not_only_what_is_known() -> None:
    # Issue 35's channels: values under protocol words at any depth, property names and
    # metadata keys, the model string itself.
    body = {"model": "gpt-ahmet.yilmaz@firma.com", "reasoning_effort": "TC 10000000146",
            "metadata": {"type": "TR330006100519786457841326", "Zeynep Kaya kanser tedavisi görüyor": "1"},
            "messages": [{"role": "0532 123 45 67", "content": [{"type": "Ali Veli diyabet", "text": "hi"}]}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {
                "type": "object", "properties": {"Mehmet Demir HIV pozitif": {"type": "string", "format": "x"}}}}}}
    texts, _ = inspectable_texts(body)
    for sent in ("gpt-ahmet.yilmaz@firma.com", "TC 10000000146", "TR330006100519786457841326", "0532 123 45 67",
                 "Zeynep Kaya kanser tedavisi görüyor", "Ali Veli diyabet", "Mehmet Demir HIV pozitif"):
        assert sent in texts, sent
    assert {"email", "tckn", "iban", "phone"} <= set(classify_parts(texts).kinds)


def test_file_and_image_parts_are_opaque_whatever_their_keys() -> None:
    for part in ({"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0x", "filename": "a.pdf"},
                 {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                 {"type": "file", "file": {"file_data": "JVBERi0x"}}):
        body = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "oku"}, part]}]}
        assert inspectable_texts(body)[1], part


def test_unreadable_parts_make_the_request_opaque() -> None:
    image = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    assert inspectable_texts(image)[1]
    assert inspectable_texts({"prompt": [101, 2023, 102]})[1]
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    assert inspectable_texts(deep)[1]
    tools = {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {}}}}
    assert not inspectable_texts(tools)[1]


def test_token_id_prompts_are_set_apart_for_the_tokenizer() -> None:
    from fairgate.policies.request_texts import readable_parts

    flat = readable_parts({"model": "m", "prompt": [5, 6, 7]})
    assert (flat.texts, flat.opaque, flat.token_prompts) == (["m"], False, [[5, 6, 7]])
    batch = readable_parts({"model": "m", "prompt": ["TC 10000000146", [1, 2], [3]]})
    assert (batch.texts, batch.opaque, batch.token_prompts) == (["TC 10000000146", "m"], False, [[1, 2], [3]])
    embed = readable_parts({"model": "m", "input": [[9, 8]]})  # embeddings: ids, not numbers to scan
    assert (embed.texts, embed.opaque, embed.token_prompts) == (["m"], False, [[9, 8]])
    for odd in ([[1, 2], {"x": 1}], [[1, True]], [[]], [1.5]):  # nothing a tokenizer or detector reads
        assert readable_parts({"model": "m", "prompt": odd}).opaque, odd
    nested = readable_parts({"metadata": {"prompt": [1, 2]}, "messages": [{"role": "user", "content": "hi"}]})
    assert nested.opaque and nested.token_prompts == []  # ids below the top level: unread, fail closed
    assert inspectable_texts({"model": "m", "prompt": [[1, 2]]}) == (["m"], True)  # callers without a tokenizer
