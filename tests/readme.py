"""The code blocks of README.md's Policy section, so that tests keep the documentation true."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def policy_section() -> str:
    text = README.read_text()
    start = text.index("\n## Policy\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def code_blocks(language: str, section: str | None = None) -> list[str]:
    """Fenced blocks of ``language`` ("" for bare fences) in the Policy section, or in its ``### section``."""
    text = policy_section()
    if section is not None:
        start = text.index(f"\n### {section}\n")
        end = text.find("\n### ", start + 1)
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
