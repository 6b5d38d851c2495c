"""Include measured markdown tables (benchmarks) in the reST site, offline.

The benchmark scripts write GitHub-flavoured markdown (`benchmarks/results/*.md`,
`doc/benchmarks_*.md`). No markdown parser is a docs dependency, so this small
converter turns the subset they use (headings, paragraphs, bullet lists, pipe
tables, fenced code, inline code/bold/links) into reST. Headings become rubrics
so that an included file never fights the page's own section levels.

``.. md-include:: GLOB`` includes every matching file (sorted), each preceded by
a rubric naming the file and the date of its last commit.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import glob
import os
import re
import subprocess

from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


_TOKEN = re.compile(
    r"(`+[^`]+`+)"  # code span
    r"|(\*\*[^*\s](?:[^*]*[^*\s])?\*\*)"  # **strong**
    r"|((?<![\w*])\*[^*\s](?:[^*]*[^*\s])?\*(?![\w*]))"  # *emphasis*
    r"|(\[[^\]]+\]\([^)\s]+\))"  # [text](url)
)


def _escape(text):
    """Make plain markdown text inert in reST (``*``, ``|``, ``name_``, backslash)."""
    text = text.replace("\\|", "|").replace("\\", "\\\\")
    text = re.sub(r"([*|`])", r"\\\1", text)
    return re.sub(r"(\w)_(?!\w)", r"\1\\_", text)


def _inline(text):
    """Markdown inline markup to reST; everything else is escaped."""
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        out.append(_escape(text[pos : m.start()]))
        code, strong, em, link = m.groups()
        if code:
            out.append("``" + code.strip("`").replace("\\|", "|") + "``")
        elif strong:
            out.append("**" + _escape(strong[2:-2]) + "**")
        elif em:
            out.append("*" + _escape(em[1:-1]) + "*")
        else:
            label, url = _LINK.match(link).groups()
            out.append(f"`{_escape(label)} <{url}>`__")
        pos = m.end()
    out.append(_escape(text[pos:]))
    return "".join(out)


def _cells(line):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells = re.split(r"(?<!\\)\|", line)
    return [_inline(c.strip()) or r"\ " for c in cells]


def _table(rows):
    header, body = rows[0], rows[1:]
    width = len(header)
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *body]:
        row = (row + [r"\ "] * width)[:width]
        out.append("   * - " + row[0])
        out.extend("     - " + cell for cell in row[1:])
    return [*out, ""]


def markdown_to_rst(text):
    """Convert the markdown subset written by the benchmarks to reST lines."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            lang = line.strip()[3:].strip() or "text"
            block, i = [], i + 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                block.append(lines[i])
                i += 1
            out += ["", f".. code-block:: {lang}", ""]
            out += ["   " + b for b in block] + [""]
        elif line.startswith("#"):
            title = _inline(line.lstrip("#").strip())
            out += ["", f".. rubric:: {title}", ""]
        elif (
            line.strip().startswith("|")
            and i + 1 < len(lines)
            and _TABLE_RULE.match(lines[i + 1])
        ):
            rows = [_cells(line)]
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out += ["", *_table(rows)]
            continue
        elif re.match(r"^\s*([-*+]|\d+\.)\s+", line):
            indent = len(line) - len(line.lstrip())
            if not out or out[-1].strip() and not re.match(r"^\s*[-*]", out[-1]):
                out.append("")
            item = re.sub(r"^\s*([-*+]|\d+\.)\s+", "- ", line)
            out.append(" " * indent + _inline(item))
        elif not line.strip():
            out.append("")
        else:
            out.append(_inline(line))
        i += 1
    return out


def _last_commit_date(path):
    try:
        res = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", os.path.basename(path)],
            cwd=os.path.dirname(path) or ".",
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


class MarkdownInclude(Directive):
    """``.. md-include:: GLOB`` (relative to the current source file)."""

    required_arguments = 1
    option_spec = {"no-source": directives.flag}

    def run(self):
        env = self.state.document.settings.env
        src_dir = os.path.dirname(env.doc2path(env.docname))
        pattern = os.path.normpath(os.path.join(src_dir, self.arguments[0]))
        paths = sorted(glob.glob(pattern))
        lines = []
        for path in paths:
            env.note_dependency(path)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if "no-source" not in self.options:
                rel = os.path.relpath(path, os.path.dirname(env.srcdir))
                date = _last_commit_date(path)
                when = f", last committed {date}" if date else " (not committed yet)"
                lines += ["", f".. rubric:: ``{rel}``{when}", ""]
            lines += markdown_to_rst(text)
        if not paths:
            lines = ["", f"*No file matches* ``{self.arguments[0]}`` *yet.*", ""]
        node_holder = []
        self.state_machine.insert_input(StringList(lines, source=pattern), pattern)
        return node_holder


def setup(app):
    app.add_directive("md-include", MarkdownInclude)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
