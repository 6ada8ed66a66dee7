"""The documentation holds to the repository and to the CLI.

- Every relative link in README.md, CHANGELOG.md, ARCHITECTURE.md and docs/**/*.md names a file
  that exists, and a ``#anchor`` into a Markdown file names one of its headings (GitHub's slugs).
- Every ``ptc``/``bin/ptc`` command in a fenced code block of README.md and docs/ names a command
  of the CLI with options it has; so does every inline ``bin/ptc ...`` span, and every inline
  ``ptc WORD ...`` span whose WORD is a top-level command (an inline ``ptc resume: ...`` is a
  Slurm reason, not a command). The CLI is read in-process, from click's command tree.

Placeholders: positional values are not checked (``NAME``, ``NODE...``, ``FILE``); ``[--x]`` is
``--x``; ``a/b`` and ``a|b`` in a command's place are each checked; ``...`` ends what is checked
of a command; ``--`` ends its options (what follows runs on the nodes).
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elastic.paths import REPO_ROOT

LINKED = [
    REPO_ROOT / "README.md",
    REPO_ROOT / "CHANGELOG.md",
    REPO_ROOT / "ARCHITECTURE.md",
    *sorted((REPO_ROOT / "docs").rglob("*.md")),
]
COMMANDS_SHOWN = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


# --- Markdown: code, text, headings ------------------------------------------------------------


def split_fences(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The lines outside fenced code blocks ("" in place of fenced lines, so numbers hold), and
    each fenced block's info string and lines."""
    prose: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            blocks.append((line.strip()[3:].strip(), []))
            prose.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip()[3:].strip():
                fence = None
            else:
                blocks[-1][1].append(line)
            prose.append("")
        else:
            prose.append(line)
    return prose, blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered, lower case, without punctuation but
    ``-`` and ``_``, each space a ``-``."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    prose, _ = split_fences(path.read_text())
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose:
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(path: Path) -> Iterator[tuple[int, str]]:
    prose, _ = split_fences(path.read_text())
    for number, line in enumerate(prose, 1):
        text = INLINE_CODE.sub("", line)
        for target in LINK.findall(text):
            yield number, target
        reference = REFERENCE.match(text)
        if reference:
            yield number, reference.group(1)


def broken_link(source: Path, target: str) -> str | None:
    """Why ``target``, linked from ``source``, does not resolve; None when it does."""
    if SCHEME.match(target) or target.startswith("//"):
        return None  # a URL: not checked (no network)
    where, _, anchor = target.partition("#")
    file = (source.parent / where).resolve() if where else source
    if not file.is_relative_to(REPO_ROOT.resolve()):
        return f"{target}: outside the repository"
    if not file.exists():
        return f"{target}: no such file or directory"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"{target}: {rel(file)} has no heading #{anchor}"
    return None


# --- The CLI -----------------------------------------------------------------------------------


@functools.cache
def cli() -> Any:
    """The root of click's command tree for ``ptc`` (typer's, walked by duck typing: typer may
    carry its own copy of click)."""
    import typer

    from elastic import cli as package

    app = package.app
    if not (app.registered_commands or app.registered_groups):
        package._register()
    return typer.main.get_command(app)


@dataclass(frozen=True)
class Shown:
    """A command as a page shows it."""

    where: str
    text: str


PROMPT = re.compile(r"^\s*(?:\$|#)\s+")
START = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\./|\.venv/)?(?:bin/)?ptc(?:\s|$)")


def commands_in_block(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line offset, command) for each ptc command in a code block: continuations joined, shell
    comments dropped, and lines cut at ``&&``, ``||``, ``;`` and `` | ``."""
    joined: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for offset, line in enumerate(lines):
        if not pending:
            start = offset
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        joined.append((start, pending + stripped))
        pending = ""
    if pending:
        joined.append((start, pending))
    for offset, line in joined:
        line = PROMPT.sub("", line).strip()
        for segment in re.split(r"&&|\|\||;|\s\|\s", line):
            segment = segment.strip()
            if START.match(segment):
                yield offset, segment


def shown_commands(path: Path) -> Iterator[Shown]:
    prose, blocks = split_fences(path.read_text())
    for info, lines in blocks:
        language = info.split()[0].lower() if info else ""
        if language in {"yaml", "yml", "json", "python", "py", "xml", "toml", "ini", "text"}:
            continue
        for _, command in commands_in_block(lines):
            yield Shown(f"{rel(path)} (code block)", command)
    top = set(cli().commands)
    for number, paragraph in paragraphs(prose):
        for _, span in INLINE_CODE.findall(paragraph):
            span = " ".join(span.replace("\\|", "|").split())
            if span.startswith(("bin/ptc ", "./bin/ptc ")) or (
                span.startswith("ptc ") and span.split()[1] in top
            ):
                yield Shown(f"{rel(path)}:{number}", span)


def paragraphs(prose: list[str]) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each run of non-blank lines, joined, since an inline code
    span may wrap; each table row on its own."""
    start = 0
    lines: list[str] = []
    for number, line in enumerate([*prose, ""], 1):
        if line.strip() and not line.lstrip().startswith("|"):
            if not lines:
                start = number
            lines.append(line.strip())
            continue
        if lines:
            yield start, " ".join(lines)
            lines = []
        if line.strip():
            yield number, line


def words(command: str) -> list[str]:
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote in prose: plain words will do
        tokens = command.split()
    while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tokens[0]):
        tokens.pop(0)  # VAR=value before the command
    tokens = tokens[1:]  # ptc itself
    cleaned = []
    for token in tokens:
        token = token.strip()
        while token.startswith("[") and not token.startswith("[["):
            token = token[1:]
        while token.endswith("]") and token.count("[") < token.count("]"):
            token = token[:-1]
        if token:
            cleaned.append(token)
    return cleaned


def option_names(command: Any) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for param in command.params:
        if param.param_type_name == "option":
            for name in [*param.opts, *param.secondary_opts]:
                names[name] = param
    return names


def is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not re.fullmatch(r"-\d[\d.]*", token)


def problems(command: str) -> list[str]:
    """What is wrong with one command as shown: an unknown command or an unknown option of
    it. Empty when every path the line can mean is a command with those options."""
    return check(cli(), ["ptc"], words(command))


def check(node: Any, path: list[str], tokens: list[str]) -> list[str]:
    name = " ".join(path)
    if hasattr(node, "commands"):  # a group: the next word names a subcommand
        if not tokens or tokens[0] in ("...", "…"):
            return []
        first, rest = tokens[0], tokens[1:]
        if first in ("--help", "-h"):
            return []
        if is_option(first):
            return [f"{name}: {first} is not an option of a command group; name a command"]
        found = []
        for choice in re.split(r"[/|]", first):
            sub = node.commands.get(choice)
            if sub is None:
                known = ", ".join(sorted(node.commands))
                found.append(f"{name}: no command {choice!r} (there are: {known})")
            else:
                found += check(sub, [*path, choice], rest)
        return found
    options = option_names(node)
    arguments = [p for p in node.params if p.param_type_name == "argument"]
    variadic = any(p.nargs == -1 for p in arguments)
    found = []
    positional = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            break
        if token in ("...", "…"):
            continue
        if not is_option(token):
            positional += 1
            continue
        option, has_value, _ = token.partition("=")
        if option in ("--help",):
            continue
        param = options.get(option)
        if param is None:
            known = ", ".join(sorted(o for o in options if o.startswith("--"))) or "none"
            found.append(f"{name}: no option {option} (its options: {known})")
            continue
        if not param.is_flag and not has_value:
            i += max(param.nargs, 1)
    if not variadic and positional > len(arguments):
        found.append(
            f"{name}: {positional} positional values where it takes {len(arguments)} "
            f"({', '.join(p.name.upper() for p in arguments) or 'none'})"
        )
    return found


# --- Tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", LINKED, ids=rel)
def test_every_relative_link_resolves(page: Path) -> None:
    if not page.exists():
        pytest.fail(f"{rel(page)} is missing")
    broken = [
        f"{rel(page)}:{number}: {why}"
        for number, target in links(page)
        if (why := broken_link(page, target))
    ]
    assert not broken, "\n".join(broken)


def test_docs_exist_and_are_linked_from_the_index() -> None:
    index = REPO_ROOT / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for _, t in links(index)}
    pages = {p.resolve() for p in (REPO_ROOT / "docs").rglob("*.md")} - {index.resolve()}
    assert pages, "docs/ has no pages"
    assert not pages - linked, f"not in docs/README.md: {sorted(map(str, pages - linked))}"


@pytest.mark.parametrize("page", COMMANDS_SHOWN, ids=rel)
def test_every_command_shown_exists_with_its_options(page: Path) -> None:
    wrong = [
        f"{shown.where}: {shown.text}\n    {why}"
        for shown in shown_commands(page)
        for why in problems(shown.text)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_demo_s_closing_commands_exist() -> None:
    from elastic.cli.demo import next_steps

    steps = next_steps("demo", REPO_ROOT / "state" / "experiments" / "demo" / "hpcc.parquet")
    assert steps and all(s.startswith("bin/ptc ") for s in steps)
    assert [p for s in steps for p in problems(s)] == []


@pytest.mark.parametrize(
    "line",
    [
        "bin/ptc node status NAME [--json]",
        "ptc up PROFILE --name NAME [--testbed local] [--image prepared|bare]",
        "ptc node power-off/power-on NAME NODE...",
        "ptc control status|start|stop NAME",
        "bin/ptc run NAME 'node-[0-3]' --parallel 2 --json -- 'df -h /'",
        "PTC_HOME=/tmp/x bin/ptc deploy demo -e ptc_elastic=true --limit=head",
        "ptc elastic ...",
        "bin/ptc --help",
    ],
)
def test_a_good_line_passes(line: str) -> None:
    assert problems(line) == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("bin/ptc staus demo", "no command 'staus'"),
        ("bin/ptc node power-off/power-down NAME NODE", "no command 'power-down'"),
        ("bin/ptc deploy NAME --quick", "no option --quick"),
        ("ptc elastic --url URL status NAME", "not an option of a command group"),
        ("ptc status demo head", "2 positional values where it takes 1"),
        ("bin/ptc testbed set [--cpus 3]", "no option --cpus"),
    ],
)
def test_a_bad_line_is_rejected(line: str, said: str) -> None:
    assert any(said in p for p in problems(line)), problems(line)


def test_a_page_showing_a_wrong_command_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `bin/ptc node power-of demo node-1`, then `ptc deploy demo\n--fast`.\n\n"
        "```sh\nbin/ptc status demo\nbin/ptc sim run T --out d --colour red\n```\n"
        "`ptc resume: configure failed` is a Slurm reason, not a command.\n"
    )
    wrong = {s.text: problems(s.text) for s in shown_commands(page)}
    assert wrong["bin/ptc status demo"] == []
    assert "no command 'power-of'" in " ".join(wrong["bin/ptc node power-of demo node-1"])
    assert "no option --fast" in " ".join(wrong["ptc deploy demo --fast"])
    assert "no option --colour" in " ".join(wrong["bin/ptc sim run T --out d --colour red"])
    assert not any(text.startswith("ptc resume") for text in wrong)


def test_code_blocks_yield_their_commands() -> None:
    block = [
        "bin/ptc deploy mycluster && bin/ptc verify mycluster   # both",
        "$ bin/ptc sim run T --out results/x \\",
        "    --nodes 200",
        ".venv/bin/python benchmarks/sim_speed.py",
        "ptc-playbook --limit node-1",
    ]
    assert [" ".join(c.split()) for _, c in commands_in_block(block)] == [
        "bin/ptc deploy mycluster",
        "bin/ptc verify mycluster # both",
        "bin/ptc sim run T --out results/x --nodes 200",
    ]


def test_slugs_follow_github() -> None:
    assert slug("Node operations: power, reload, release, allocate") == (
        "node-operations-power-reload-release-allocate"
    )
    assert slug("Commands across nodes: `ptc run`, `ptc put`") == (
        "commands-across-nodes-ptc-run-ptc-put"
    )
    assert slug("ptc — the Part-Time Cloud toolkit") == "ptc--the-part-time-cloud-toolkit"
    assert slug("Per-job provisioning (Multiverse): `elastic_per_job`") == (
        "per-job-provisioning-multiverse-elastic_per_job"
    )
