"""The docs site builds with `mkdocs build --strict` (a broken link or nav entry fails it) and every page it builds
renders in headless Chromium with no console message."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_report import render

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if "search" not in p.parts)


def test_every_page_of_the_nav_is_built(site):
    built = {p.parent.relative_to(site).as_posix() for p in _pages(site)}
    assert {".", "guides/evaluate", "guides/ci", "reference/cli", "reference/sql", "metrics", "benchmarks"} <= built


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The build above can fail: the same config with a page linking nowhere is refused."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](nowhere.md)\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(
        (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[0] + "\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode != 0 and "nowhere.md" in done.stderr


def test_every_page_renders_with_no_console_message(site):
    pages = _pages(site)
    assert len(pages) >= 15
    for page in pages:
        dom, console = render(page)
        assert "<article" in dom, page
        assert console == [], f"{page.relative_to(site)}: {console}"


def test_readme_is_a_short_start_without_history():
    """The README stays a first screen: at most ~250 lines, no issue numbers; the rest lives in docs/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert not re.search(r"\bissues? #?\d+", readme, flags=re.I)
    assert "ragsql demo" in readme and "docs/benchmarks.md" in readme
