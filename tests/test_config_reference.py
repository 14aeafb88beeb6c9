"""docs/config-reference.md is what the code that reads the configuration says (issue 37): every
setting and every key of every section, with its type and default. Regenerate it with
`python -m fairgate.gateway.config.reference > docs/config-reference.md` after changing a schema."""

from __future__ import annotations

from pathlib import Path

from fairgate.gateway.admin.pools import PoolIn
from fairgate.gateway.admin.schemas import QuotaSet
from fairgate.gateway.config.declarative import BackendDecl, TenantDecl
from fairgate.gateway.config.reference import render
from fairgate.gateway.settings import Settings
from fairgate.policies.routing_schema import _MATCH_FLOAT, _MATCH_INT, _MATCH_STR

DOC = Path(__file__).resolve().parents[1] / "docs" / "config-reference.md"


def test_the_committed_reference_is_what_the_schema_says() -> None:
    assert DOC.read_text() == render(), "regenerate docs/config-reference.md (see this test's docstring)"


def test_every_key_is_in_the_reference() -> None:
    text = render()
    keys = [*Settings.model_fields, *BackendDecl.model_fields, *PoolIn.model_fields, *(k for k in TenantDecl.model_fields if k != "quota"),
            *QuotaSet.model_fields, *_MATCH_STR, *_MATCH_INT, *_MATCH_FLOAT]
    missing = [k for k in keys if f"| `{k}` |" not in text]  # (`quota` is a table of its own)
    assert not missing, missing


def test_the_readme_example_file_is_valid(monkeypatch) -> None:
    import re

    import yaml

    from fairgate.gateway.config.declarative import parse

    text = (DOC.parents[1] / "README.md").read_text()
    block = re.search(r"A small file \(every key.*?```yaml\n(.*?)```", text, re.S)
    assert block is not None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    declared = parse(yaml.safe_load(block.group(1)))
    assert [r.name for r in declared.config.tenants or []] == ["acme"] and declared.settings["redis_url"]
