"""The docs site as a browser shows it: the site is built from this checkout (mkdocs, strict mode), and the
home page and a chapter page are rendered by headless chromium (`--dump-dom`: the DOM after the page's
scripts ran), then read section by section.

chromium is Debian's package, installed by `make setup` (`make chromium`); where it is missing the test
skips and says so, except in CI (`CI` set), where the setup must have installed it and a missing one fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if CHROMIUM is None:
        message = "chromium is not on PATH: `make chromium` installs Debian's package (as root)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-3000:]}"
    return out


class Sections(HTMLParser):
    """The page's article cut at its h2 headings: for each, its tables (rows of cell texts, links kept as
    (text, href)) and its images' src."""

    def __init__(self):
        super().__init__()
        self.sections: list[dict] = [{"title": "", "tables": [], "images": [], "links": []}]
        self.in_article = False
        self.heading: list[str] | None = None
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "article":
            self.in_article = True
        if not self.in_article:
            return
        if tag == "h2":
            self.heading = []
        elif tag == "table":
            self.table = []
            self.sections[-1]["tables"].append(self.table)
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = []
        elif tag == "img":
            self.sections[-1]["images"].append(attrs.get("src", ""))
        elif tag == "a" and attrs.get("href") and self.cell is not None:
            self.sections[-1]["links"].append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "article":
            self.in_article = False
        elif tag == "h2" and self.heading is not None:
            title = "".join(self.heading).replace("¶", "").strip()
            self.sections.append({"title": title, "tables": [], "images": [], "links": []})
            self.heading = None
        elif tag == "table":
            self.table = None
        elif tag in ("td", "th") and self.cell is not None:
            self.table[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.heading is not None:
            self.heading.append(data)
        if self.cell is not None:
            self.cell.append(data)


def rendered(page: Path) -> Sections:
    """The DOM chromium renders for `page`, parsed."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<article" in done.stdout, f"chromium rendered no article for {page}: {done.stderr[-2000:]}"
    parsed = Sections()
    parsed.feed(done.stdout)
    return parsed


def target(page: Path, href: str) -> Path:
    """The built file a relative link or image of `page` points at (a folder's index.html for a page URL)."""
    path = (page.parent / unquote(urlsplit(href).path)).resolve()
    return path / "index.html" if path.is_dir() else path


def test_home_page_shows_the_learning_path_table(site):
    page = site / "index.html"
    sections = rendered(page).sections
    tables = [t for s in sections for t in s["tables"]]
    path_tables = [t for t in tables if t and [c.lower() for c in t[0]] == ["stop", "reading order", "key question"]]
    assert path_tables, f"no table headed stop | reading order | key question on the home page; tables: {[t[0] for t in tables if t]}"
    rows = path_tables[0][1:]
    assert [r[0][:2] for r in rows] == ["01", "02", "03", "04", "04", "04"], rows
    assert all(r[1] and r[2].endswith("?") for r in rows), "every stop needs its reading order and its key question"
    assert "Loss Functions → GRPO → DAPO → GSPO" in rows[0][1]
    links = [h for s in sections for h in s["links"] if "chapters/" in h]
    linked = {target(page, h).parent.name for h in links}
    assert {"losses", "grpo", "dapo", "gspo", "opd", "opd-specialist", "opsd", "search-r1", "retool", "textworld",
            "vision-grpo", "spec-o3", "tempo", "agent-opsd", "jev"} <= linked
    for href in links:
        assert target(page, href).is_file(), f"the path table links {href}, which the built site lacks"


def test_chapter_page_has_a_results_table_and_its_figure(site):
    page = site / "chapters" / "dapo" / "index.html"
    sections = rendered(page).sections
    results = [s for s in sections if s["title"].startswith("Results")]
    assert results, f"no Results section on the DAPO page; sections: {[s['title'] for s in sections]}"
    first = results[0]
    assert first["tables"] and len(first["tables"][0]) > 2, "the Results section has no table with rows"
    header = first["tables"][0][0]
    assert any("held-out" in c or "accuracy" in c for c in header), header
    assert first["images"], "the Results section has no figure"
    for src in first["images"]:
        image = target(page, src)
        assert image.is_file(), f"figure {src} is not in the built site"
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"figure {src} is not a PNG"
