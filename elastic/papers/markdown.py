"""The report's sections as Markdown: tables, figures (linked PNGs) and notes."""

from __future__ import annotations

from collections.abc import Sequence

from elastic.papers.table import Section, Table


def cell(text: str) -> str:
    """A table cell: one line, with the column separator escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def table(t: Table) -> str:
    parts = [f"**{t.title}**", "", grid(t.headers, t.cells())]
    if t.notes:
        parts += ["", *(f"- {note}" for note in t.notes)]
    return "\n".join(parts)


def section(s: Section, figures: str) -> str:
    """``figures``: the figure directory as a link relative to the page."""
    parts = [f"## {s.title}", ""]
    for paragraph in s.intro:
        parts += [paragraph, ""]
    for t in s.tables:
        parts += [table(t), ""]
    for title, headers, rows in s.extra_tables:
        parts += [f"**{title}**", "", grid(headers, rows), ""]
    for f in s.figures:
        parts += [f"![{f.caption}]({figures}/{f.file})", "", f"*{f.caption}*", ""]
    if s.notes:
        parts += [*(f"- {note}" for note in s.notes), ""]
    return "\n".join(parts)


def page(title: str, preface: Sequence[str], sections: Sequence[Section], figures: str) -> str:
    parts = [f"# {title}", ""]
    for paragraph in preface:
        parts += [paragraph, ""]
    parts += [section(s, figures) for s in sections]
    return "\n".join(parts).rstrip() + "\n"
