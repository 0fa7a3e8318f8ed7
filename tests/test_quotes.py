"""What a chapter's prose quotes from its outputs is in its outputs (issue 20).

Prose that repeats a kernel name, a count or a printed line was true when it was written and drifts when the code or
a re-run changes the output. So prose marks what it quotes, and this test checks every marked quote against the
chapter's stored outputs (which nbval re-checks against a fresh run on every CI run):

- inline, HTML's element for program output: `<samp>scheduled 5 kernels</samp>`, or around a code span when the text
  has characters markdown would read (`*`, `_` at a word's edge): ``<samp>`*** CPU 7 E_4_4`</samp>``. It renders as
  monospace in Jupyter and on the site; nothing else changes.
- a whole fenced block: the line `<!-- quote -->` (invisible when rendered) right before the fence; every non-blank
  line of the block is a quote.

A quote is found when some line of an output of a code cell in the same `##` section (the section the markdown cell
is in, from its `##` heading to the next `#`/`##` heading) holds it. Prose that quotes an output of another section
says so, `<samp data-scope="chapter">...</samp>` or `<!-- quote: chapter -->`; then any output of the chapter counts.
Runs of spaces count as one space and ANSI colour codes are ignored, so a DEBUG=2 line can be quoted as the reader
sees it. `…` in a quote stands for any text within that line: a figure that changes from run to run is written `…`,
the rest is checked. Which figures change is what nbval is told to ignore (tests/nbval_sanitize.cfg: times, GFLOPS and
GB/s, memory in use, addresses); a quote that holds one fails, since it could only have been true of one run. Where a
paragraph states something the outputs should show but does not quote them, quote the output line that shows it.

The other way to keep a sentence true is a cell that builds it from the value (`display(Markdown(f"..."))`): nbval
compares its `text/markdown` output like any other, after the same sanitizing, so it too must not print a figure that
varies between runs. The course prefers marked quotes: the prose stays in markdown cells, where a reader expects it.

A figure only a run can give may not stand in prose unmarked (issue 29): a number with a unit of time (ns, µs, ms,
s), of speed (GFLOPS, TFLOPS, GB/s, tokens/s), of arithmetic intensity (FLOP/B) or of memory a run reports (MB, GB),
and a count of kernels ("3 kernels"), is a marked quote of an output, comes from a cell that builds the sentence, or
goes. Sizes that are facts of the hardware or of an array's shape are written in binary units (a 1 MiB L2, 4 KiB
pages, 16M floats are 64 MiB), which is also what they are; a count of kernels the text predicts rather than reports
("how many kernels?") is written in words.
"""

import difflib
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import course  # noqa: E402

SAMP = re.compile(r"<samp(?P<scope>\s+data-scope=\"chapter\")?>(?P<text>.*?)</samp>", re.DOTALL)
BLOCK = re.compile(r"^[ \t]*<!--\s*quote(?P<scope>:\s*chapter)?\s*-->[ \t]*\n[ \t]*(?P<fence>```|~~~)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
                   re.MULTILINE | re.DOTALL)  # fmt: skip
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
GAP = "…"


def _sanitizers() -> list[re.Pattern]:
    "The regexes nbval applies to outputs before comparing them: what they match differs from run to run."
    lines = (ROOT / "tests" / "nbval_sanitize.cfg").read_text().splitlines()
    return [re.compile(ln.split(":", 1)[1].strip()) for ln in lines if ln.startswith("regex:")]


SANITIZERS = _sanitizers()


@dataclass
class Quote:
    text: str  # what the reader sees (code ticks and entities gone)
    chapter: bool = False  # found in any output of the chapter, not only its section's


def quotes(md: str) -> list[Quote]:
    "The marked quotes of one markdown cell, as the reader sees them."
    out = []
    for m in SAMP.finditer(md):
        chapter = bool(m["scope"])
        text = m["text"].strip()
        code = re.fullmatch(r"(`+)\s?(.*?)\s?\1", text, re.DOTALL)
        if code:
            text = code[2]
        else:  # code spans lose their ticks, tags go, and markdown's backslash escapes are undone
            text = course.CODE_SPAN.sub(lambda c: c["code"].strip(), text)
            text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", course.HTML_TAG.sub("", text))
        out.append(Quote(html.unescape(text), chapter))
    for m in BLOCK.finditer(md):
        out += [Quote(line, bool(m["scope"])) for line in m["body"].splitlines() if line.strip()]
    return out


# a number (not the end of a word or of another number: "1s", "3×3", "v2") with a unit that only a run can give it
MEASURED = re.compile(r"(?<![\w.×/-])\d[\d,]*(?:\.\d+)?(?:[ \u00a0]|&nbsp;)?"
                      r"(?:[nµu]s|ms|GFLOPS|TFLOPS|GB/s|MB/s|tokens/s|FLOP/B|FLOP/byte|MB|GB)(?![\w/])"
                      r"|(?<![\w.×/-])\d[\d,]*(?:\.\d+)?(?:[ \u00a0]|&nbsp;)(?:s|seconds?|kernels?)(?![\w/])")
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)


def unmarked_figures(md: str) -> list[str]:
    "The measured figures of a markdown cell that stand outside its marked quotes (code examples in fences aside)."
    md = FENCE.sub(" ", BLOCK.sub(" ", SAMP.sub(" ", md)))
    return [m[0] for m in MEASURED.finditer(md)]


def normal(text: str) -> str:
    return " ".join(ANSI.sub("", text).split())


def output_lines(cell) -> list[str]:
    "Every line of a code cell's stored outputs as text, normalized."
    texts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            texts.append(o.text)
        elif o.output_type == "error":
            texts.append(f"{o.ename}: {o.evalue}")
        else:
            data = o.get("data", {})
            texts += [data[k] for k in ("text/plain", "text/markdown") if k in data]
            if "text/html" in data:
                texts.append(re.sub(r"<[^>]+>", " ", data["text/html"]))
    return [n for t in texts for line in t.splitlines() if (n := normal(line))]


def found(quote: str, lines: list[str]) -> bool:
    pieces = [p for p in (normal(p) for p in quote.split(GAP)) if p]
    if not pieces:
        return False

    def in_line(line: str) -> bool:
        at = 0
        for p in pieces:
            if (at := line.find(p, at)) < 0:
                return False
            at += len(p)
        return True

    return any(in_line(line) for line in lines)


def sections(nb) -> list[set[int]]:
    """For each cell, the sections it is in, each named by the cell whose `#` or `##` heading starts it: one, or two for
    a markdown cell whose text runs on from the section before into a heading of its own."""
    start, out = 0, []
    for i, c in enumerate(nb.cells):
        md = course.source(c) if c.cell_type == "markdown" else ""
        if any(level <= 2 for level, _ in course.headings(md)):
            before = start if course.HEADING.match(md.lstrip().splitlines()[0]) is None else None
            start = i
            out.append({start} | ({before} if before is not None else set()))
        else:
            out.append({start})
    return out


def quote_problems(nb, notebook: str) -> list[str]:
    "Each marked quote of the notebook that its section's outputs do not hold, with the closest output line."
    section = sections(nb)
    problems = []
    for i, c in enumerate(nb.cells):
        if c.cell_type != "markdown":
            continue
        qs = quotes(course.source(c))
        for q in qs:
            if varying := [m[0].strip() for rx in SANITIZERS for m in rx.finditer(q.text)]:
                problems.append(f"{notebook} cell {i}: quotes {q.text!r}, with figures that change from run to run "
                                f"(nbval ignores them): {varying}; write each as {GAP!r}")
                continue
            lines = [ln for j, d in enumerate(nb.cells) if d.cell_type == "code" and (q.chapter or section[j] & section[i])
                     for ln in output_lines(d)]  # fmt: skip
            if not found(q.text, lines):
                near = difflib.get_close_matches(normal(q.text), lines, n=1, cutoff=0.3)
                where = "the chapter" if q.chapter else "its section"
                problems.append(f"{notebook} cell {i}: quotes {q.text!r}, which no output of {where} shows"
                                + (f"; closest output line: {near[0]!r}" if near else ""))
    return problems


@pytest.mark.parametrize("path", course.course_notebooks(), ids=lambda p: p.stem)
def test_quotes_are_in_the_outputs(path):
    problems = quote_problems(nbformat.read(path, as_version=4), path.name)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", course.course_notebooks(), ids=lambda p: p.stem)
def test_no_unmarked_measured_figures(path):
    nb = nbformat.read(path, as_version=4)
    problems = [f"{path.name} cell {i}: {fig!r} stands in prose unmarked: quote the output that shows it (<samp>...</samp>, "
                "… for what varies), build the sentence in a cell, or drop it"
                for i, c in enumerate(nb.cells) if c.cell_type == "markdown" for fig in unmarked_figures(course.source(c))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("md, figures", [
    ("Building `A @ B` took 120 µs.", ["120 µs"]),                        # issue 29's example from chapter 2
    ("The step takes 45 ms instead of 53; torch: 68 to 75 ms.", ["45 ms", "75 ms"]),
    ("423 kernels instead of 381", ["423 kernels"]),
    ("at 1,200 GFLOPS and 12.5 GB/s, 43 FLOP/B", ["1,200 GFLOPS", "12.5 GB/s", "43 FLOP/B"]),
    ("a peak of 2.57 GB against 0.37 GB", ["2.57 GB", "0.37 GB"]),
    ("it compiles in 0.2 s per source", ["0.2 s"]),
    ("The run says <samp>scheduled 2 kernels</samp> in <samp>… ms</samp>.", []),   # marked quotes are checked above
    ("<!-- quote -->\n```\nscheduled 423 kernels\n```", []),
    ("```python\nsleep(5 s)  # an example, not prose\n```", []),
    ("a 1 MiB L2, 4 KiB pages, rows of 0s and 1s, 3×3 kernels, conv2d's kernels", []),   # facts, and no figure
])  # fmt: skip
def test_figure_checker(md, figures):
    assert unmarked_figures(md) == figures


def test_figure_rule_fails_on_a_chapter_with_an_unmarked_figure(tmp_path):
    "The rule, run as CI runs it, on a chapter whose prose states a time: it fails and names the cell and the figure."
    nb = _nb(("md", "# T"), ("md", "This kernel runs in 0.35 ms."), ("code", "run()", "tm 0.35ms\n"))
    nbformat.write(nb, path := tmp_path / "t.ipynb")
    with pytest.raises(AssertionError, match=r"t.ipynb cell 1: '0.35 ms' stands in prose unmarked"):
        test_no_unmarked_measured_figures(path)


def test_the_course_marks_quotes():
    "The markup is in use (a renamed tag would make every chapter pass without checking anything)."
    n = sum(len(quotes(course.source(c))) for p in course.course_notebooks()
            for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown")  # fmt: skip
    assert n >= 20, f"only {n} marked quotes in the course"


# ---- the checker itself, on small notebooks
def _nb(*cells):
    out = []
    for kind, text, *outputs in cells:
        if kind == "md":
            out.append(nbformat.v4.new_markdown_cell(text))
        else:
            c = nbformat.v4.new_code_cell(text)
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in outputs]
            out.append(c)
    return nbformat.v4.new_notebook(cells=out)


DEBUG_LINE = "\x1b[32m*** CPU        7\x1b[0m E_\x1b[34m4\x1b[0m_4   arg  2 mem  0.00 GB tm      5.12us/     0.03ms\n"


@pytest.mark.parametrize("md, ok", [
    ("The run says <samp>scheduled 2 kernels</samp>.", True),
    ("The run says <samp>scheduled 5 kernels</samp>.", False),
    ("It is kernel <samp>`*** CPU 7 E_4_4`</samp>.", True),  # colours and column padding do not count
    ("It is kernel <samp>`*** CPU 5 E_4_4`</samp>.", False),  # the kernel number drifted
    ("<samp>`*** CPU 7 E_4_4 arg 2 mem … GB tm …/…`</samp>", True),  # the times and the memory are elided
    ("<samp>`*** CPU 7 E_4_4 arg 2 mem … GB tm 5.12us/ 0.03ms`</samp>", False),  # a time is quoted: it drifts
    ("<samp>`*** CPU 7 E_4_4 arg 2 mem 0.00 GB`</samp>", False),  # so does the memory in use, though it matches
    ("<samp>scheduled 2</samp> and <samp>E_4_4 … GB</samp>", True),
    ("<samp>E_4_4 … scheduled</samp>", False),  # the pieces must be in one line, in order
    ("Prints:\n\n<!-- quote -->\n```\nscheduled 2 kernels\n*** CPU 7 E_4_4 …\n```", True),
    ("Prints:\n\n<!-- quote -->\n```\nscheduled 2 kernels\n*** CPU 3 E_4_4 …\n```", False),
    ("Prints:\n\n```\nnot marked, not checked\n```", True),
    ("<samp>{'t': 20}</samp>", False),  # a longer number is not found inside a shorter one's line
])  # fmt: skip
def test_checker(md, ok):
    nb = _nb(("md", "# T"), ("md", md), ("code", "run()", "scheduled 2 kernels\n", DEBUG_LINE + "{'t': 2}\n"))
    assert (quote_problems(nb, "t.ipynb") == []) is ok


def test_checker_looks_in_the_section_only():
    "A quote is checked against its own `##` section, so that one section's output cannot vouch for another's prose."
    nb = _nb(("md", "# T"), ("md", "## One"), ("code", "", "scheduled 2 kernels\n"),
             ("md", "## Two\n\nIt says <samp>scheduled 2 kernels</samp>."), ("code", "", "scheduled 3 kernels\n"))  # fmt: skip
    problems = quote_problems(nb, "t.ipynb")
    assert len(problems) == 1 and "t.ipynb cell 3" in problems[0] and "scheduled 3 kernels" in problems[0], problems
    nb.cells[3].source = "### Two\n\nIt says <samp>scheduled 2 kernels</samp>."  # a subsection: still section One
    assert quote_problems(nb, "t.ipynb") == []
    nb.cells[3].source = "It says <samp>scheduled 2 kernels</samp>.\n\n## Two"  # the text before a heading: section One
    assert quote_problems(nb, "t.ipynb") == []
    nb.cells[3].source = "## Two\n\nAbove: <samp data-scope=\"chapter\">scheduled 2 kernels</samp>."  # said so
    assert quote_problems(nb, "t.ipynb") == []
    nb.cells[3].source = "## Two\n\nAbove:\n\n<!-- quote: chapter -->\n```\nscheduled 2 kernels\n```"
    assert quote_problems(nb, "t.ipynb") == []
    nb.cells[3].source = "## Two\n\nAbove:\n\n<!-- quote: chapter -->\n```\nscheduled 4 kernels\n```"
    assert len(quote_problems(nb, "t.ipynb")) == 1


# The three drifts issue 20 found, as the chapters had them (main at 4b05621), with their quotes marked.
ORIGINAL_DRIFTS = {
    "00's DEBUG=2 line: quoted with the figures of an older run": (
        "<!-- quote -->\n```\n*** CPU        3 r_2_8_32_256_16_8    arg  3 mem  0.00 GB tm    484.57us/     1.30ms "
        "(   69.25 GFLOPS    1.62 GB/s)\n```",
        "*** CPU        3 r_2_8_32_256_16_8                         arg  3 mem  0.00 GB tm    307.57us/     0.91ms "
        "(   109.09 GFLOPS    2.56 GB/s)\n",
    ),
    "08b's kernel number: the quoted line says 5, the run printed 7": (
        "<!-- quote -->\n```\n*** CPU        5 r_4 … arg  3 mem … GB tm …\n```",
        "*** CPU        7 r_4                                       arg  3 mem  0.00 GB tm     16.41us/     0.45ms "
        "(     0.00 GFLOPS    0.00 GB/s)\n",
    ),
    "09's 'last replay': the label's values are the capture's, t = 2, not the last replay's, t = 20": (
        "After 20 steps the last replay's values are <samp>`{'t': 20}`</samp>.",
        "variables: [('t', 1, 32)] | last replay's values: {'t': 2}\n",
    ),
}


@pytest.mark.parametrize("case", ORIGINAL_DRIFTS)
def test_catches_the_drifts_of_issue_20(case):
    md, output = ORIGINAL_DRIFTS[case]
    assert quote_problems(_nb(("md", "# T"), ("md", md), ("code", "run()", output)), "t.ipynb"), case
