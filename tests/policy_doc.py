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
    return [block for fence, block in fenced_blocks(text) if fence == language]


def shown_runs(command: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """Each shown run of ``python -m extender COMMAND``: its command line, the lines it prints, and the files it
    reads: for each name, the latest YAML block before it whose first line is ``# NAME``."""
    files: dict[str, str] = {}
    runs = []
    for fence, block in fenced_blocks(policy_section()):
        first, _, rest = block.partition("\n")
        if fence == "yaml" and first.startswith("# ") and first.endswith(".yaml"):
            files[first[2:]] = block
        elif fence == "" and first.startswith(f"$ python -m extender {command} "):
            runs.append((first, rest.splitlines(), dict(files)))
    return runs


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block, in order."""
    blocks: list[tuple[str, str]] = []
    fence: str | None = None  # the language of the open block
    lines: list[str] = []
    for line in text.splitlines():
        if fence is None and line.startswith("```"):
            fence, lines = line[3:].strip(), []
        elif fence is not None and line == "```":
            blocks.append((fence, "\n".join(lines) + "\n"))
            fence = None
        elif fence is not None:
            lines.append(line)
    return blocks
