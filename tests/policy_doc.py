"""The code blocks of the policy reference (docs/policy.md and a page per built-in plugin in docs/plugins/), so that
tests keep the policy documentation true."""

from __future__ import annotations

from pathlib import Path

POLICY_DOC = Path(__file__).resolve().parents[1] / "docs" / "policy.md"
PLUGIN_DOCS = POLICY_DOC.parent / "plugins"


def plugin_pages() -> list[Path]:
    """The built-in plugins' pages, docs/plugins/<plugin>.md."""
    return sorted(path for path in PLUGIN_DOCS.glob("*.md") if path.name != "README.md")


def policy_section() -> str:
    """The whole policy reference: docs/policy.md, then each plugin's page."""
    return "\n".join(path.read_text() for path in [POLICY_DOC, *plugin_pages()])


def code_blocks(language: str, section: str | None = None) -> list[str]:
    """Fenced blocks of ``language`` ("" for bare fences) in the policy reference, or in its ``## section`` (on
    whichever page has it)."""
    text = policy_section()
    if section is not None:
        heading = f"\n## {section}\n"
        [text] = [page for page in map(Path.read_text, [POLICY_DOC, *plugin_pages()]) if heading in page]
        start = text.index(heading)
        end = text.find("\n## ", start + 1)
        text = text[start : end if end != -1 else None]
    return [block for fence, block in fenced_blocks(text) if fence == language]


def plugin_snippets() -> list[str]:
    """The ``- name: <plugin>`` pluginConfig examples of the plugins' pages."""
    return [
        block
        for path in plugin_pages()
        for fence, block in fenced_blocks(path.read_text())
        if fence == "yaml" and block.startswith("- name: ")
    ]


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
