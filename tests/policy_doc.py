"""The code blocks of docs/policy.md, so that tests keep the policy documentation true."""

from __future__ import annotations

from pathlib import Path

POLICY_DOC = Path(__file__).resolve().parents[1] / "docs" / "policy.md"


def policy_section() -> str:
    """The whole policy reference."""
    return POLICY_DOC.read_text()


def code_blocks(language: str, section: str | None = None) -> list[str]:
    """Fenced blocks of ``language`` ("" for bare fences) in docs/policy.md, or in its ``## section``."""
    text = policy_section()
    if section is not None:
        start = text.index(f"\n## {section}\n")
        end = text.find("\n## ", start + 1)
        text = text[start : end if end != -1 else None]
    blocks: list[str] = []
    fence: str | None = None  # the language of the open block
    lines: list[str] = []
    for line in text.splitlines():
        if fence is None and line.startswith("```"):
            fence, lines = line[3:].strip(), []
        elif fence is not None and line == "```":
            if fence == language:
                blocks.append("\n".join(lines) + "\n")
            fence = None
        elif fence is not None:
            lines.append(line)
    return blocks
