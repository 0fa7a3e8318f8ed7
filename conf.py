"""Sphinx configuration of the docs site: `make docs` renders the notebooks into _docs/.

tools/build_docs.py prepares the notebooks in _proc/ (nbdev's processing, then MyST-NB's
conventions) and runs `sphinx-build -c . _proc _docs`. Names and versions come from settings.ini.
Notebooks are never executed here: the pages show the outputs stored in nbs/.
"""

import os
from configparser import ConfigParser
from pathlib import Path

_here = Path(__file__).resolve().parent
_parser = ConfigParser(delimiters=["="])
_parser.read(_here / "settings.ini", encoding="utf-8")
_settings = _parser["DEFAULT"]

project = _settings["title"]
author = _settings["author"]
copyright = _settings["copyright"]
version = release = _settings["version"]

extensions = ["myst_nb"]
exclude_patterns = ["**/.ipynb_checkpoints", "**/_*", ".*"]

# MyST: Quarto-style ::: callouts, $math$, {attrs} after links (show_doc's source link). Links stay
# plain hrefs: pages carry nbdev's names (tensor.html), so links written for Quarto work here too.
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "attrs_inline"]
myst_all_links_external = True
myst_heading_anchors = 3

nb_execution_mode = "off"  # show the stored outputs; `make nbs` refreshes them
nb_merge_streams = True
nb_render_markdown_format = "myst"  # text/markdown outputs read like markdown cells

# show_doc output starts at ### under a # chapter title
suppress_warnings = ["myst.header"]

html_theme = "furo"
html_title = project
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None

# MathJax and the ipywidgets renderer from our own _static/ rather than a CDN, when
# tools/build_docs.py has them (it copies them from npm once): the pages then work offline.
# the course's own styles: folded solutions and answers, defined terms (tools/course.py's conventions)
html_static_path = [str(_here / "tools" / "docs_static")]
html_css_files = ["course.css"]
_js = os.environ.get("TINYLIT_DOCS_JS")
if _js and Path(_js, "require.js").exists():
    html_static_path.append(_js)
    mathjax_path = "mathjax/tex-mml-chtml.js"
    nb_ipywidgets_js = {"require.js": {}, "embed-amd.js": {}}
