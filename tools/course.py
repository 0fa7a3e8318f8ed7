"""The course's conventions in one place: what every chapter has, how its exercises and questions are laid out and
folded, and the glossary made from the chapters. tests/test_course.py checks them, tools/build_docs.py renders them.

    python tools/course.py check [NB ...]   # what each chapter lacks (the same checks as tests/test_course.py)
    python tools/course.py fold [NB ...]    # collapse in Jupyter what the site folds (`make nbs` runs it)
    python tools/course.py glossary         # print the glossary page as markdown

The convention. A chapter is a notebook in nbs/ (nbdev's rule: no `_`/`.` names). Roles of cells are given by
cell *tags* (Jupyter's cell metadata `tags`, kept by nbdev_clean: settings.ini's `allowed_cell_metadata_keys`).

1. **Learning goals.** The first markdown cell after the `# Title` / `> summary` cell starts with the line
   `## Learning goals` and has 3 to 5 top-level bullets (`- ...`).
2. **Terms.** A term is defined where it is first used, by wrapping the defining words in `<dfn>`:
   `... one node type, the <dfn>UOp</dfn> ...` (`<dfn title="hash-consing">hash-consed</dfn>` when the words
   differ from the term's name). The sentence holding the `<dfn>` is the glossary's definition, so it should
   define. A term is defined once in the course. Other chapters link to it where it helps the reader:
   `[UOp](03_uop.ipynb#term-uop)` (`term-` + the term's slug), which in Jupyter opens the defining chapter there;
   the check only makes sure such a link points at the chapter that defines the term. The site is Sphinx's: the
   glossary page is its `glossary` directive, made from the `<dfn>`s, and each link to a term becomes its `term`
   role, which Sphinx resolves to the glossary entry (and warns about if there is none).
3. **Exercises** sit under `## Exercises`, after "tinygrad then and now". Each is four parts, in this order:
   - the prompt, a markdown cell tagged `exercise`, starting `### Exercise N: title` (N = 1, 2, ...);
   - the reader's cell, a code cell tagged `exercise-reader` that only binds the answer's names to `...`
     (`count_bases = ...`), with a comment saying what to put there;
   - the check, a code cell tagged `exercise-check` (without imports: nbdev's docs build runs every cell holding an
     import, where the reader's names do not exist; import in an earlier cell): it defines `check_<something>(answer, ...)`, which raises
     (`assert`, `test_eq`, ...) on a wrong answer and prints what was right, then calls it on the reader's names,
     unless they still hold `...`:
         if count_bases is ...: print("Not tried yet: ...")
         else: check_count_bases(count_bases)
   - the reference solution, one or more cells tagged `exercise-solution` (folded), one of which calls the check
     on the solution, so that CI (nbval) runs every reference solution through its check.
4. **Check your understanding** is the chapter's last `##` section: `## Check your understanding`, then five
   questions, each a markdown cell tagged `question` starting `**N.**`, followed by its answer: one or more cells
   tagged `answer` (folded), the first a markdown cell starting `**Answer.**` that links to the section of this
   chapter that teaches it: `[Bases and views](#Bases-and-views)`, a heading's id as JupyterLab makes it (its text
   with spaces as `-`; the site build turns it into the site's id). An answer may add a code cell (tagged
   `answer`) that computes what it says, which nbval then checks.
5. **Folding.** Cells tagged `exercise-solution` or `answer` are collapsed in Jupyter (cell metadata
   `jupyter.source_hidden`, and for code `jupyter.outputs_hidden` and `collapsed`) and folded on the site; so are
   code cells marked `#| code-fold: true` or tagged `folded`, source only (their output, usually a picture, stays
   in view; use the tag on an exported cell, since nbdev copies `#| code-fold` into the module). `fold` sets the
   metadata from the tags; the test checks it is there.
"""

from __future__ import annotations

import argparse
import ast
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"

EXERCISE, READER, CHECK, SOLUTION = "exercise", "exercise-reader", "exercise-check", "exercise-solution"
QUESTION, ANSWER = "question", "answer"
FOLDED = "folded"  # a code cell whose source folds (an exported cell can't carry `#| code-fold`: nbdev would export it)
ROLE_TAGS = {EXERCISE, READER, CHECK, SOLUTION, QUESTION, ANSWER}
FOLDED_TAGS = {SOLUTION, ANSWER}
GOALS, EXERCISES, CYU = "## Learning goals", "## Exercises", "## Check your understanding"
N_QUESTIONS, GOALS_RANGE = 5, (3, 5)

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXERCISE_HEAD = re.compile(r"^### Exercise (\d+)\s*[:.]\s*\S")
QUESTION_HEAD = re.compile(r"^\*\*(\d+)\.\*\*\s+\S")
DFN = re.compile(r"<dfn(?P<attrs>[^>]*)>(?P<text>.*?)</dfn>", re.DOTALL)
DFN_TITLE = re.compile(r"""title\s*=\s*(["'])(.*?)\1""")
LINK = re.compile(r"(?<!!)\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<dest>[^)\s]*)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(?P<code>.+?)\1", re.DOTALL)
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
OPTION = re.compile(r"^\s*#\|\s*([\w-]+)\s*:\s*(.*?)\s*$")


# ---- cells
def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def cell_options(cell) -> dict[str, str]:
    "Quarto-style `#| key: value` options at the top of a code cell."
    opts = {}
    for line in source(cell).splitlines():
        if not (m := OPTION.match(line)):
            break
        opts[m[1]] = m[2].strip("'\"").lower()
    return opts


def folded_on_site(cell) -> str | None:
    "'all' (input and output fold), 'input' (a code-fold cell), or None."
    if tags(cell) & FOLDED_TAGS:
        return "all"
    if cell.cell_type == "code" and (cell_options(cell).get("code-fold") in ("true", "hide") or FOLDED in tags(cell)):
        return "input"
    return None


def wanted_jupyter_metadata(cell) -> dict:
    "The collapse metadata a cell folded on the site must carry in Jupyter."
    how = folded_on_site(cell)
    if how is None:
        return {}
    if cell.cell_type != "code":
        return {"jupyter": {"source_hidden": True}}
    if how == "input":
        return {"jupyter": {"source_hidden": True}}
    return {"jupyter": {"source_hidden": True, "outputs_hidden": True}, "collapsed": True}


def fold_problems(cell) -> list[str]:
    meta = cell.get("metadata", {})
    problems = []
    for key, want in wanted_jupyter_metadata(cell).items():
        have = meta.get(key)
        if isinstance(want, dict):
            missing = {k for k, v in want.items() if (have or {}).get(k) is not v}
            if missing:
                problems.append(f"metadata {key}.{'/'.join(sorted(missing))} must be true")
        elif have is not want:
            problems.append(f"metadata {key} must be {want}")
    return problems


def fold(nb) -> int:
    "Set the collapse metadata of every cell the site folds; returns how many cells changed."
    changed = 0
    for cell in nb.cells:
        want = wanted_jupyter_metadata(cell)
        if not want or not fold_problems(cell):
            continue
        meta = cell.setdefault("metadata", {})
        for key, value in want.items():
            if isinstance(value, dict):
                meta.setdefault(key, {}).update(value)
            else:
                meta[key] = value
        changed += 1
    return changed


# ---- markdown helpers
def headings(md: str) -> list[tuple[int, str]]:
    "(level, text) of the ATX headings outside fenced code."
    md = FENCE.sub("", md)
    return [(len(m[1]), m[2]) for line in md.splitlines() if (m := HEADING.match(line))]


def plain_text(md: str) -> str:
    "What a reader sees of a bit of inline markdown: no code ticks, emphasis, link targets or tags."
    md = LINK.sub(lambda m: m["text"], md)
    codes: list[str] = []  # code spans stand aside while emphasis goes: `jit_cache` keeps its underscore
    md = CODE_SPAN.sub(lambda m: codes.append(m["code"].strip()) or f"\0{len(codes) - 1}\0", md)
    md = HTML_TAG.sub("", md)
    md = re.sub(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1", r"\2", md)
    md = re.sub(r"\0(\d+)\0", lambda m: codes[int(m[1])], md)
    return html.unescape(md)


def jupyter_anchor(heading_text: str) -> str:
    "The id JupyterLab gives a heading: its text with spaces replaced by '-' (case and punctuation kept)."
    return plain_text(heading_text).replace(" ", "-")


def site_anchor(fragment: str) -> str:
    "The id of the same heading on the docs site (docutils' make_id), or the fragment itself for a term."
    if fragment.startswith("term-"):
        return fragment
    from docutils.nodes import make_id

    return make_id(fragment.replace("-", " "))


def slug(term: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", plain_text(term).lower()).strip("-")


# ---- the glossary
@dataclass
class Term:
    "One glossary entry: a term, where it is defined, and its defining sentence."

    name: str  # the term, as the glossary lists it
    words: str  # the words inside <dfn> (markdown)
    notebook: str  # e.g. "03_uop.ipynb"
    cell: int
    sentence: str  # markdown of the sentence that holds the <dfn>

    @property
    def slug(self) -> str:
        return slug(self.name)

    @property
    def anchor(self) -> str:
        return f"term-{self.slug}"


_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|vs|etc|cf|Fig|al)\.$")


def _sentences(paragraph: str) -> list[str]:
    "Split a paragraph into sentences (ends: . ! ? before a space and a capital, a backtick, a link or a bracket)."
    parts, start = [], 0
    for m in re.finditer(r"[.!?][*_)`\"']*(?=\s+[A-Za-z`\[(<*])", paragraph):
        if _ABBREVIATIONS.search(paragraph[start : m.end()]) or _inside_code(paragraph, m.start()):
            continue
        parts.append(paragraph[start : m.end()].strip())
        start = m.end()
    parts.append(paragraph[start:].strip())
    return [p for p in parts if p]


def _inside_code(text: str, pos: int) -> bool:
    return any(m.start() < pos < m.end() for m in CODE_SPAN.finditer(text))


def _paragraph_at(md: str, pos: int) -> str:
    "The paragraph (or list item) of `md` that holds position `pos`."
    blocks = [m for m in re.finditer(r"(?:^(?:[ \t]*(?:[-*+]|\d+\.)\s).*(?:\n(?![ \t]*(?:[-*+]|\d+\.)\s)(?!\s*\n).*)*"
                                      r"|(?:^(?![ \t]*(?:[-*+]|\d+\.)\s)(?!\s*$).*(?:\n(?![ \t]*(?:[-*+]|\d+\.)\s)(?!\s*$).*)*))",
                                      md, re.MULTILINE)]  # fmt: skip
    for m in blocks:
        if m.start() <= pos < m.end():
            text = re.sub(r"^[ \t]*(?:[-*+]|\d+\.)\s+", "", m[0])
            return " ".join(text.split())
    return " ".join(md.split())


def definitions(nb, notebook: str) -> list[Term]:
    "The terms a notebook defines with <dfn>."
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        md = source(cell)
        for m in DFN.finditer(md):
            words = m["text"].strip()
            title = DFN_TITLE.search(m["attrs"])
            name = title[2] if title else plain_text(words)
            paragraph = _paragraph_at(md, m.start())
            tag = " ".join(m[0].split())
            sentence = next((s for s in _sentences(paragraph) if tag in s), paragraph)
            out.append(Term(name, words, notebook, i, sentence))
    return out


def course_notebooks() -> list[Path]:
    "Every chapter, by nbdev's rule (names not starting with `_` or `.`), index first."
    nbs = [p for p in sorted(NBS.glob("*.ipynb")) if not p.name.startswith(("_", "."))]
    return sorted(nbs, key=lambda p: (p.name != "index.ipynb", p.name))


def read(path: Path):
    return nbformat.read(path, as_version=4)


def glossary(paths: list[Path] | None = None) -> tuple[dict[str, Term], list[str]]:
    "Every term of the course by slug, and the problems found (a term defined twice)."
    terms, problems = {}, []
    for path in paths or course_notebooks():
        for t in definitions(read(path), path.name):
            if (old := terms.get(t.slug)) is not None:
                problems.append(f"{t.name!r} is defined twice: {old.notebook} cell {old.cell} and {t.notebook} cell {t.cell}")
            else:
                terms[t.slug] = t
    return terms, problems


def glossary_markdown(terms: dict[str, Term], titles: dict[str, str]) -> str:
    """The glossary page: Sphinx's `glossary` directive, one entry per term (its defining sentence and a link to where
    it is defined; links to .ipynb, as in nbs/). Sphinx sorts the entries, gives each the id `term-` + its name, and
    resolves the `term` role that the site's links to terms become (tools/build_docs.py)."""
    lines = ["# Glossary", "",
             "> Every term the course defines, with the sentence that defines it and a link to where it is defined.", "",
             "Each term is defined once, in the chapter that first needs it (`<dfn>` in its text); this page is made from "
             "those definitions when the site is built.", "", "```{glossary}", ":sorted:", ""]  # fmt: skip
    for t in terms.values():
        sentence = " ".join(DFN.sub(lambda m: f"**{m['text'].strip()}**", t.sentence).split())
        lines += [plain_text(t.name), f"  {sentence} ([{titles.get(t.notebook, t.notebook)}]({t.notebook}#{t.anchor}))", ""]
    return "\n".join(lines + ["```"])


def title_of(nb) -> str:
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    for level, text in headings(source(first)) if first else []:
        if level == 1:
            return plain_text(text)
    return ""


# ---- links to terms
def term_problems(nb, notebook: str, terms: dict[str, Term]) -> list[str]:
    "Links to a term (`#term-...`) that no chapter defines, or that point at another chapter than the one defining it."
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for m in LINK.finditer(source(cell)):
            target, _, frag = m["dest"].partition("#")
            if frag.startswith("term-"):
                owner = terms.get(frag[len("term-"):])
                if owner is None:
                    problems.append(f"cell {i} links to {m['dest']}, but no chapter defines that term")
                elif (target or notebook) != owner.notebook:
                    problems.append(f"cell {i} links to {m['dest']}, but {owner.name!r} is defined in {owner.notebook}")
    return problems


# ---- the structure of a chapter
def _code_problems(check_src: str, names: list[str]) -> tuple[str | None, list[str]]:
    "The check function a check cell defines, and what is wrong with the cell."
    try:
        tree = ast.parse(_strip_options(check_src))
    except SyntaxError as e:
        return None, [f"check cell does not parse: {e}"]
    problems = []
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("check_")]
    if not funcs:
        return None, ["check cell defines no check_...() function"]
    fn = funcs[-1]

    def asserts(node) -> bool:
        for n in ast.walk(node):
            if isinstance(n, (ast.Assert, ast.Raise)):
                return True
            if isinstance(n, ast.Call):
                f = n.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name.startswith(("test_", "assert")) or (isinstance(f, ast.Name) and f.id.startswith("check_")):
                    return True
        return False

    if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
        problems.append("check cell imports: nbdev's docs build runs every cell holding an import, where the reader's "
                        "names do not exist; import in an earlier cell of the chapter")
    if not any(asserts(f) for f in funcs):
        problems.append(f"{fn.name}() never asserts: it could not fail on a wrong answer")
    guard = next((n for n in tree.body if isinstance(n, ast.If)), None)
    if guard is None:
        problems.append(f"check cell has no `if {names[0] if names else 'answer'} is ...:` guard for the untried answer")
    else:
        guarded = {n.left.id for n in ast.walk(guard.test) if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name)
                   and isinstance(n.ops[0], ast.Is) and isinstance(n.comparators[0], ast.Constant)
                   and n.comparators[0].value is Ellipsis}  # fmt: skip
        if set(names) - guarded:
            problems.append(f"the guard must test `is ...` for {sorted(set(names) - guarded)}")
        calls = {n.func.id for n in ast.walk(ast.Module(guard.orelse, [])) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name)}  # fmt: skip
        if fn.name not in calls and not calls & {f.name for f in funcs}:
            problems.append(f"the guard's else branch must call {fn.name}() on the reader's answer")
    return fn.name, problems


def _strip_options(src: str) -> str:
    return "\n".join(ln for ln in src.splitlines() if not OPTION.match(ln))


def _reader_names(src: str) -> tuple[list[str], list[str]]:
    try:
        tree = ast.parse(_strip_options(src))
    except SyntaxError as e:
        return [], [f"reader cell does not parse: {e}"]
    names, problems = [], []
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is Ellipsis:
            names += [t.id for t in n.targets if isinstance(t, ast.Name)]
        else:
            problems.append("the reader's cell may only bind names to `...` (with comments saying what to write)")
    if not names:
        problems.append("the reader's cell binds no name to `...`")
    return names, problems


def _calls(src: str, name: str) -> bool:
    try:
        tree = ast.parse(_strip_options(src))
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(tree))


def heading_anchors(nb) -> set[str]:
    return {jupyter_anchor(text) for c in nb.cells if c.cell_type == "markdown" for _, text in headings(source(c))}


def structure_problems(nb, notebook: str, needs_exercises: bool = True) -> list[str]:
    "What the chapter lacks of the convention (goals, exercises, questions, folding); [] when it follows it."
    problems: list[str] = []
    cells = nb.cells
    md = [i for i, c in enumerate(cells) if c.cell_type == "markdown"]
    if not md or not source(cells[md[0]]).startswith("# "):
        problems.append("the first markdown cell must be the `# Title` (and `> summary`) cell")
    # 1. learning goals
    if len(md) < 2 or not source(cells[md[1]]).startswith(GOALS):
        problems.append(f"the markdown cell after the title must start with {GOALS!r}")
    else:
        bullets = [ln for ln in source(cells[md[1]]).splitlines() if re.match(r"^- \S", ln)]
        if not GOALS_RANGE[0] <= len(bullets) <= GOALS_RANGE[1]:
            problems.append(f"learning goals: {len(bullets)} bullets, want {GOALS_RANGE[0]} to {GOALS_RANGE[1]}")
    # 2. roles: every tagged cell belongs to an exercise or a question
    i, n_ex, seen_exercises_heading, cyu_at = 0, 0, None, None
    for k, c in enumerate(cells):
        first = source(c).splitlines()[0] if source(c) else ""
        if c.cell_type == "markdown" and first.startswith(EXERCISES):
            seen_exercises_heading = k
        if c.cell_type == "markdown" and first.startswith(CYU) and cyu_at is None:
            cyu_at = k
    while i < len(cells):
        c, t = cells[i], tags(cells[i]) & ROLE_TAGS
        if EXERCISE in t:
            n_ex += 1
            problems += [f"exercise {n_ex}: {p}" for p in _exercise_problems(cells, i, n_ex, seen_exercises_heading)]
            i += 1
            while i < len(cells) and tags(cells[i]) & {READER, CHECK, SOLUTION}:
                i += 1
            continue
        if t - {QUESTION, ANSWER}:
            problems.append(f"cell {i} is tagged {sorted(t)} outside an exercise (an `exercise` prompt comes first)")
        i += 1
    if needs_exercises and n_ex == 0:
        problems.append(f"no exercises: each chapter has at least one, under {EXERCISES!r}")
    # 3. check your understanding
    if cyu_at is None:
        problems.append(f"no {CYU!r} section")
    else:
        problems += _cyu_problems(nb, cyu_at)
    # 4. folding
    for k, c in enumerate(cells):
        for p in fold_problems(c):
            problems.append(f"cell {k} ({sorted(tags(c) & FOLDED_TAGS) or 'code-fold/folded'}) is folded on the site, so in "
                            f"Jupyter too: {p} (run `python tools/course.py fold {notebook}`)")  # fmt: skip
    return problems


def _exercise_problems(cells, i: int, n: int, exercises_heading: int | None) -> list[str]:
    problems = []
    prompt = source(cells[i])
    if cells[i].cell_type != "markdown" or not (m := EXERCISE_HEAD.match(prompt)):
        problems.append(f"the prompt (cell {i}) must be markdown starting `### Exercise {n}: title`")
    elif int(m[1]) != n:
        problems.append(f"the prompt (cell {i}) is numbered {m[1]}, want {n}")
    if exercises_heading is None or exercises_heading > i:
        problems.append(f"it must come after the {EXERCISES!r} heading")
    parts = [(READER, "the reader's cell"), (CHECK, "the check cell")]
    names, check_fn = [], None
    for k, (tag, what) in enumerate(parts, start=1):
        j = i + k
        if j >= len(cells) or tag not in tags(cells[j]) or cells[j].cell_type != "code":
            problems.append(f"cell {j} must be {what}: a code cell tagged {tag!r}")
            return problems
        if tag == READER:
            names, more = _reader_names(source(cells[j]))
            problems += more
        else:
            check_fn, more = _code_problems(source(cells[j]), names)
            problems += more
    sols = []
    j = i + 3
    while j < len(cells) and SOLUTION in tags(cells[j]):
        sols.append(j)
        j += 1
    if not any(cells[s].cell_type == "code" for s in sols):
        problems.append(f"cell {i + 3} must start the reference solution: code cell(s) tagged {SOLUTION!r}")
    elif check_fn and not any(_calls(source(cells[s]), check_fn) for s in sols if cells[s].cell_type == "code"):
        problems.append(f"the reference solution never calls {check_fn}(): CI would not check it")
    return problems


def _cyu_problems(nb, at: int) -> list[str]:
    cells, problems = nb.cells, []
    if not source(cells[at]).startswith(CYU):
        problems.append(f"cell {at}: {CYU!r} must start its cell")
    later = [(k, text) for k in range(at + 1, len(cells)) if cells[k].cell_type == "markdown"
             for lvl, text in headings(source(cells[k])) if lvl <= 2]  # fmt: skip
    if later:
        problems.append(f"{CYU!r} must be the last section, but cell {later[0][0]} starts {later[0][1]!r}")
    anchors = heading_anchors(nb)
    questions, k = 0, at + 1
    while k < len(cells):
        c = cells[k]
        if QUESTION in tags(c):
            questions += 1
            if not QUESTION_HEAD.match(source(c)) or int(QUESTION_HEAD.match(source(c))[1]) != questions:
                problems.append(f"question {questions} (cell {k}) must start `**{questions}.**`")
            answers = []
            k += 1
            while k < len(cells) and ANSWER in tags(cells[k]):
                answers.append(k)
                k += 1
            if not answers:
                problems.append(f"question {questions} (cell {k - 1}) has no answer: cell(s) tagged {ANSWER!r} after it")
                continue
            first = cells[answers[0]]
            if first.cell_type != "markdown" or not source(first).startswith("**Answer.**"):
                problems.append(f"question {questions}: its answer (cell {answers[0]}) must be markdown starting **Answer.**")
            frags = [m["dest"][1:] for m in LINK.finditer(source(first)) if m["dest"].startswith("#")]
            if not any(f in anchors for f in frags):
                problems.append(f"question {questions}: its answer (cell {answers[0]}) must link to the section of this "
                                f"chapter that teaches it, `[...](#Heading-text)`; found {frags or 'no such link'} "
                                f"(headings: {sorted(anchors)[:6]}...)")  # fmt: skip
            continue
        if c.cell_type == "code" and not source(c).strip().startswith(("#| hide", "#|hide")) and "nbdev_export(" not in source(c):
            problems.append(f"cell {k}: only questions and answers belong in {CYU!r} (tag it, or move it)")
        elif c.cell_type == "markdown" and tags(c) & ROLE_TAGS != {QUESTION}:
            if ANSWER in tags(c):
                problems.append(f"cell {k}: an answer without a question before it")
            else:
                problems.append(f"cell {k}: untagged markdown inside {CYU!r}")
        k += 1
    if questions != N_QUESTIONS:
        problems.append(f"{CYU!r} has {questions} questions, want {N_QUESTIONS}")
    return problems


def chapter_problems(path: Path, terms: dict[str, Term] | None = None) -> list[str]:
    "Everything tests/test_course.py checks about one chapter."
    nb = read(path)
    if terms is None:
        terms, _ = glossary()
    return structure_problems(nb, path.name, needs_exercises=path.name != "index.ipynb") + \
        term_problems(nb, path.name, terms)  # fmt: skip


# ---- command line
def _paths(names: list[str]) -> list[Path]:
    return [Path(n) if Path(n).exists() else NBS / n for n in names] if names else course_notebooks()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["check", "fold", "glossary"])
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    if args.what == "glossary":
        terms, problems = glossary()
        titles = {p.name: title_of(read(p)) for p in course_notebooks()}
        print(glossary_markdown(terms, titles))
        return 1 if problems else 0
    if args.what == "check":
        terms, problems = glossary()
        for p in problems:
            print("glossary:", p)
        bad = bool(problems)
        for path in _paths(args.notebooks):
            found = chapter_problems(path, terms)
            bad |= bool(found)
            print(f"{path.name}: {'ok' if not found else f'{len(found)} problem(s)'}")
            for p in found:
                print("  -", p)
        return 1 if bad else 0
    for path in _paths(args.notebooks):  # fold
        nb = read(path)
        if changed := fold(nb):
            nbformat.write(nb, path)
            print(f"{path.name}: collapsed {changed} cell(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
