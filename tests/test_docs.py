"""The documentation holds together: every relative link resolves to a file and anchor that exist, and the README
stays a newcomer's page (at most 15 KB; the reference lives in docs/)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT_BYTES = 15 * 1024

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def documents() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # docs/plugins/ too
    for folder in ("terraform", "tests", "bench", "deploy", "examples"):
        found += sorted(p for p in (ROOT / folder).rglob("*.md") if ".terraform" not in p.parts)
    return found


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks: links and headings inside code are examples, not document structure."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces as hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _prose_lines(path.read_text()):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(path: Path) -> list[str]:
    return [m.group(1) for line in _prose_lines(path.read_text()) for m in _LINK.finditer(line)]


def test_slug_follows_github():
    assert slug("Deploying with Terraform") == "deploying-with-terraform"
    assert slug("`python -m extender explain`: offline") == "python--m-extender-explain-offline"
    assert slug("Node facts and the Kubernetes API") == "node-facts-and-the-kubernetes-api"


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path):
    broken = []
    for target in links(document):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: outside the repository
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (document.parent / file_part).resolve() if file_part else document
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif not resolved.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_a_newcomers_page():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT_BYTES, f"README.md is {size} bytes; move reference material to docs/"
    text = (ROOT / "README.md").read_text()
    assert "functions-framework --target extender" in text, "the command that runs the extender locally"
    assert "python -m pytest" in text, "the command that runs the tests"


def test_the_readme_policy_is_valid():
    from extender.policy.loader import parse_policy
    from tests.policy_doc import fenced_blocks
    from tests.test_readme import readme_files

    blocks = [block for fence, block in fenced_blocks((ROOT / "README.md").read_text()) if fence == "yaml"]
    blocks += [text for name, text in readme_files().items() if name.endswith(".yaml")]
    assert blocks, "the README shows a minimal policy"
    for block in blocks:
        policy = parse_policy(block, "README.md")
        assert list(policy.profiles) == ["default"]


def test_the_policy_reference_opens_with_its_contents():
    """docs/policy.md's contents link every section (##), so that a reader finds a new one."""
    text = (ROOT / "docs" / "policy.md").read_text()
    contents = text.split("\nContents:\n", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {slug(line[3:]) for line in _prose_lines(text) if line.startswith("## ")}
    assert sections - linked == set(), "add these sections to the contents at the top of docs/policy.md"


def test_each_plugin_page_answers_a_newcomers_questions():
    """docs/plugins/<plugin>.md, as kubernetes-sigs/scheduler-plugins has per plugin: its args, an example, what it
    logs and how to roll it out."""
    from tests.policy_doc import plugin_pages

    pages = plugin_pages()
    assert {page.stem for page in pages} == {
        path.name for path in (ROOT / "extender" / "plugins").iterdir() if (path / "__init__.py").exists()
    }
    for page in pages:
        headings = [line for line in _prose_lines(page.read_text()) if line.startswith(("## ", "### "))]
        for wanted in ("## Args", "## Example", "## What it logs"):
            assert wanted in headings, f"{page.relative_to(ROOT)}: add a section {wanted!r}"
        assert any(line.startswith(("## Rolling", "### Rolling")) for line in headings), page.relative_to(ROOT)
