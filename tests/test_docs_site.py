"""The docs site shows every course notebook: its title, its code and its outputs, with a nav.

What each page must show is read from the notebook itself, so a new chapter is covered as soon
as it exists. Pages are served from 127.0.0.1 and opened in headless Chromium: what is checked
is the DOM a reader's browser ends up with. `make test` builds _docs/ first (`make docs`); run
alone, this test builds it when it is missing or older than a notebook.
"""

import functools
import os
import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from build_docs import course_notebooks, page_of  # noqa: E402
from nbdev.config import get_config  # noqa: E402
from nbdev.frontmatter import _fm2dict, _md2dict  # noqa: E402
from nbdev.process import extract_directives  # noqa: E402

CFG = get_config(path=ROOT)
NBS, SITE = CFG.nbs_path, CFG.config_path / CFG.doc_path
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
VARYING = re.compile(r"0x[0-9a-f]|\d\s?[mµu]?s\b")
ANSI = re.compile(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")
# cells nbdev leaves off the page (tools/build_docs.py: nbdev's processors, then Quarto's options)
HIDDEN_DIRECTIVES = {"hide", "export", "exporti", "default_exp"}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--virtual-time-budget=3000"]  # fmt: skip


def squash(text: str) -> str:
    "Whitespace-insensitive form of `text`, for finding notebook text in a page."
    return " ".join(text.split())


def shown_cells(nb):
    "(code, outputs) of the code cells a reader sees on the page, in order."
    for cell in nb.cells:
        if cell.cell_type != "code" or "nbdev_export(" in cell.source:
            continue
        directives = extract_directives(cell, remove=False)
        if HIDDEN_DIRECTIVES & directives.keys() or directives.get("include:") == ["false"]:
            continue
        if re.search(r"^show_doc", cell.source, re.MULTILINE) or directives.get("output:") == ["asis"]:
            continue  # their output becomes page text, not a cell output
        code = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("#|", "%"))]
        echo = directives.get("echo:") != ["false"]
        outputs = cell.outputs if directives.get("output:") != ["false"] else []
        yield ("\n".join(code) if echo else ""), outputs


def output_lines(output):
    "The text lines of one output as the page shows them (last state of `\\r` progress lines)."
    if "text/markdown" in output.get("data", {}):
        return []  # shown rendered, as prose: its text/plain (`<...Markdown object>`) is not on the page
    text = output.get("text") or output.get("data", {}).get("text/plain", "")
    text = ANSI.sub("", text if isinstance(text, str) else "".join(text))
    return [ln.rsplit("\r", 1)[-1].strip() for ln in text.splitlines()]


def expectations(notebook: Path) -> dict:
    "Title, one line of code and one line of output that the page of `notebook` must show."
    nb = nbformat.read(NBS / notebook, as_version=4)
    title = None
    for cell in nb.cells:
        if cell.cell_type == "raw":
            title = title or _fm2dict(cell.source).get("title")
        elif cell.cell_type == "markdown" and not title:
            title = _md2dict(cell.source).get("title")
    code = output = None
    for cell_code, outputs in shown_cells(nb):
        code = code or next((ln.strip() for ln in cell_code.splitlines() if ln.strip()), None)
        for o in outputs:
            # nbdev re-runs import cells for show_doc, so addresses and timings may differ: skip those
            lines = [ln for ln in output_lines(o) if ln and not VARYING.search(ln)]
            output = output or (lines[0] if lines else None)
    assert title, f"{notebook}: no '# Title' markdown cell (or front matter title)"
    assert code, f"{notebook}: no code cell is shown on its page"
    assert output, f"{notebook}: no shown cell has a text output (stored outputs: run `make nbs`)"
    return {"title": title, "code": code, "output": output}


class PageParts(HTMLParser):
    "Text of a rendered page, split into its h1 titles, code-cell inputs, code-cell outputs and links."

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.stack, self.parts, self.links = [], {"h1": [], "in": [], "out": []}, set()
        self.external = []  # scripts, stylesheets and images fetched from another host
        self.feed(html)
        self.parts = {k: squash("".join(v)) for k, v in self.parts.items()}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "a" and attrs.get("href"):
            self.links.add(attrs["href"].split("#")[0])
        url = attrs.get("src") if tag in ("script", "img") else None
        if tag == "link" and "stylesheet" in (attrs.get("rel") or ""):
            url = attrs.get("href")
        if url and re.match(r"(https?:)?//", url) and not url.split("//", 1)[1].startswith("127.0.0.1"):
            self.external.append(url)
        if tag in self.VOID:
            return
        kind = None
        if tag == "h1":
            kind = "h1"
        elif "cell_input" in classes:
            kind = "in"
        elif "cell_output" in classes:
            kind = "out"
        self.stack.append((tag, kind))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed tags, as browsers do
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        for kind in {k for _, k in self.stack if k}:
            self.parts[kind].append(data)


@pytest.fixture(scope="session")
def site() -> Path:
    "The built site, rebuilt first if it is missing or older than a notebook."
    index = SITE / "index.html"
    newest = max((p.stat().st_mtime for p in NBS.rglob("*.ipynb")), default=0)
    if not index.exists() or index.stat().st_mtime < newest:
        cmd = [sys.executable, str(ROOT / "tools" / "build_docs.py"), "site"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            pytest.fail(f"the docs site did not build (`make docs` shows it all):\n{done.stderr[-1200:]}")
    return SITE


@pytest.fixture(scope="session")
def server(site):
    "Base URL of the site, served on 127.0.0.1 for the whole session."
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()
    httpd.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    "A function running headless Chromium with extra arguments; absent Chromium skips (fails in CI)."
    if not os.access(CHROMIUM, os.X_OK):
        message = f"{CHROMIUM} not found: `make setup` installs Debian's chromium"
        if IN_CI:
            pytest.fail(message + " (required in CI)")
        pytest.skip(message)
    profile = tmp_path_factory.mktemp("chromium-profile")

    def run(*args: str) -> str:
        cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
        return done.stdout

    return run


notebooks = course_notebooks(CFG)


@pytest.mark.parametrize("notebook", notebooks, ids=[str(n) for n in notebooks])
def test_page_shows_notebook(notebook, server, chromium):
    expect = expectations(notebook)
    page = page_of(notebook).as_posix()
    dom = chromium("--dump-dom", server + page)
    shown = PageParts(dom)
    assert squash(expect["title"]) in shown.parts["h1"], f"{page}: title {expect['title']!r} not an h1"
    assert squash(expect["code"]) in shown.parts["in"], f"{page}: code {expect['code']!r} not shown"
    assert squash(expect["output"]) in shown.parts["out"], f"{page}: output {expect['output']!r} not shown"
    up = "../" * (len(Path(page).parts) - 1)
    others = {up + page_of(n).as_posix() for n in notebooks if n != notebook}
    others.discard(up + "index.html")
    assert others <= shown.links, f"{page}: nav lacks links to {sorted(others - shown.links)}"
    if (SITE / "_static" / "require.js").exists() or IN_CI:  # MathJax and widget scripts are ours
        assert not shown.external, f"{page} loads from the network: {shown.external}"


def test_index_screenshot(server, chromium):
    "The front page renders to a non-blank picture (kept in _docs/_screenshots/ for a person to look at)."
    shot = SITE / "_screenshots" / "index.png"
    shot.parent.mkdir(exist_ok=True)
    shot.unlink(missing_ok=True)
    chromium("--window-size=1280,900", f"--screenshot={shot}", server + "index.html")
    assert shot.exists() and shot.stat().st_size > 5000, f"no screenshot at {shot}"
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (900, 1280) and pixels.std() > 0.01, "the screenshot is blank"
