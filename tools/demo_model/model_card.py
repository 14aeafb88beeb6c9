"""Write the README.md model cards of the demo target and draft from the training metrics."""

from __future__ import annotations

from pathlib import Path


def write_cards(target_dir: Path, draft_dir: Path, m: dict) -> None:
    (target_dir / "README.md").write_text(f"# fairgate-demo\n\n{m}\n")
    (draft_dir / "README.md").write_text(f"# fairgate-demo-draft\n\n{m}\n")
