"""The give-away share of a lab: how much of its code the lesson already says, in code or in words.

The rule, in one paragraph (checkpoints/README.md repeats it):

A lab's code is what its last hint rung shows (the `# file:` excerpts that
`course verify` keeps word for word), counted in statements (a compound
statement by its header: `if ...:`, `for ...:`, `except ...:`) that are new
since the parent. A statement's cues are what it names: the calls and
attributes it uses (`os.fsync`, not `os`; `self.runtime.steer`, not
`runtime`), the globals and keyword arguments it names and the literals it
holds; not its own function's parameters and locals (any prose says `line`),
not the type it declares or the exception it raises, and not a string the
focused tests also hold (a message, a key, a command: the interface the
lesson must state). A statement with no cue (`return mode`) is left out. A
passage of the lesson (a paragraph, a whole list, or a `# not-run:` sketch)
dictates a function when it shows at least three of the function's cues, two
of them calls, and narrates two or more of its statements, each with at least
half of its cues shown: as code (in backticks or in the sketch), or in words
(`flushes` says `flush`). One name is a contract; three in one breath are
steps. A statement is given away when a passage narrates it or the lesson's
code blocks print its lines verbatim (the copy share's rule); the lab's share
is given-away statements over statements, at most 35 %.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from typing import Iterator

from attrs import frozen

from course.cards import CARD_BEGIN, CARD_END
from course.catalog import Chapter, Lab
from course.hints import excerpt_chunks, rung_excerpts

GIVEAWAY_GOAL = 0.35
MIN_NAMES = 3  # distinct cues of one function one passage must show: fewer is a contract's mention
MIN_CALLS = 2  # of them calls: a passage that names only data describes a record, not steps
MIN_STEPS = 2  # statements of one function one passage must narrate
MIN_WORD = 4  # a cue said in words is at least this long (`get`, `end` are just English)
NOT_RUN = "# not-run:"
# Names that say nothing about which step a statement takes.
NOT_CUES = frozenset({"self", "cls", "None", "True", "False", "isinstance", "len", "str", "int", "super"})

Function = ast.FunctionDef | ast.AsyncFunctionDef


# The lab's statements ----------------------------------------------------------------------


@frozen
class Statement:
    """One statement the learner writes: where it is, its text, its function and its cues."""

    file: str
    first: int  # 1-based line numbers in the target file
    last: int
    text: str
    function: str
    cues: frozenset[str]
    calls: frozenset[str]  # the cues it calls

    @property
    def where(self) -> str:
        return f"{self.file}:{self.first}"


def _docstring_lines(tree: ast.AST) -> set[int]:
    numbers: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    numbers.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return numbers


def _new_line_numbers(parent_text: str, target_text: str) -> set[int]:
    """1-based numbers of the target's lines that a line diff finds new (not in the parent)."""
    old, new = parent_text.splitlines(), target_text.splitlines()
    numbers: set[int] = set()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            numbers.update(range(start + 1, end + 1))
    return numbers


def _shown_line_numbers(code: str, source: str) -> set[int]:
    """1-based numbers of the source lines an excerpt shows (its chunks, found in order)."""
    numbers: set[int] = set()
    position = 0
    for chunk in excerpt_chunks(code):
        found = source.find(chunk, position)
        if found < 0:
            continue  # the hint-rungs check names it
        first = source.count("\n", 0, found) + 1
        numbers.update(range(first, first + chunk.count("\n") + 1))
        position = found + len(chunk)
    return numbers


def _local_names(function: Function) -> set[str]:
    """The function's parameters and every name it binds: not cues, any prose says them."""
    arguments = function.args
    names = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not function:
            names.add(node.name)
    return names


def _header(node: ast.stmt | ast.ExceptHandler) -> tuple[int, int]:
    """The lines of a statement that are its own: all of a simple one, the header of a compound one."""
    if isinstance(node, ast.Match) and node.cases:
        return node.lineno, max(node.lineno, node.cases[0].pattern.lineno - 1)
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return node.lineno, max(node.lineno, body[0].lineno - 1)
    return node.lineno, node.end_lineno or node.lineno


def _statements(function: Function) -> Iterator[ast.stmt | ast.ExceptHandler]:
    """Every statement of the function's body, nested ones included, but not nested functions'."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.stmt, ast.ExceptHandler)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                pending.extend(children)


def _cues(node: ast.AST, first: int, last: int, local: set[str]) -> tuple[set[str], set[str]]:
    """The cues and calls of the part of `node` on lines first..last (a compound statement's
    header only: its body's statements have their own)."""
    cues: set[str] = set()
    calls: set[str] = set()
    skipped: set[int] = set()
    nodes = [n for n in _walk_header(node) if first <= getattr(n, "lineno", first) <= last]
    for part in nodes:
        if isinstance(part, ast.Attribute) and isinstance(part.value, (ast.Attribute, ast.Name)):
            skipped.add(id(part.value))  # `os.fsync`, `self.runtime.steer`: the step, not its receiver
        elif isinstance(part, ast.Raise) and part.exc is not None:  # what it raises is the contract
            skipped.add(id(part.exc.func if isinstance(part.exc, ast.Call) else part.exc))
        elif isinstance(part, ast.AnnAssign):  # so is a type it declares
            skipped.update(id(inner) for inner in ast.walk(part.annotation))
    for part in nodes:
        if id(part) in skipped:
            continue
        if isinstance(part, ast.Attribute):
            cues.add(part.attr)
        elif isinstance(part, ast.Name) and part.id not in local and part.id not in NOT_CUES:
            cues.add(part.id)
        elif isinstance(part, ast.keyword) and part.arg:
            cues.add(part.arg)
        elif isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value.strip():
            cues.add('"' + part.value.strip() + '"')
        elif isinstance(part, ast.Constant) and type(part.value) in (int, float) and part.value not in (0, 1):
            cues.add(repr(part.value))
        if isinstance(part, ast.Call):
            name = part.func.attr if isinstance(part.func, ast.Attribute) else getattr(part.func, "id", None)
            if name and not name[0].isupper():  # a class called builds a record: data, not a step
                calls.add(name)
    return cues, calls & cues


def _walk_header(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, without descending into nested statements (they are counted on their own)."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)):
                continue
            pending.append(child)


def _qualified_names(tree: ast.AST) -> dict[int, str]:
    """id(function node) -> `Class.method` or `function`."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names[id(child)] = prefix + child.name
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return names


def test_strings(chapter: Chapter) -> frozenset[str]:
    """Every string the focused tests hold: the interface (messages, keys, commands the tests type)."""
    found: set[str] = set()
    for name in chapter.focused_tests:
        path = chapter.target / name
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        found |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return frozenset(found)


def _held(text: str, interface: frozenset[str]) -> bool:
    """Does some string of the interface hold `text` (as a whole word or phrase)?"""
    return any(_shows(held, text) for held in interface)


def file_statements(
    name: str, source: str, before: str, shown: set[int], interface: frozenset[str] = frozenset()
) -> list[Statement]:
    """The statements of `source` that lie on `shown` lines and are new since `before`, with their cues."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    new = shown & _new_line_numbers(before, source)
    docstrings = _docstring_lines(tree)
    lines = source.splitlines()
    names = _qualified_names(tree)
    found: list[Statement] = []
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        local = _local_names(function)
        for node in _statements(function):
            first, last = _header(node)
            if not (set(range(first, last + 1)) & new) or first in docstrings:
                continue
            cues, calls = _cues(node, first, last, local)
            cues = {cue for cue in cues if not (cue.startswith('"') and _held(cue[1:-1], interface))}
            if not cues:
                continue  # `return mode`, `try:`: a statement that names nothing is no step to give away
            text = "\n".join(line.strip() for line in lines[first - 1 : last])
            found.append(Statement(name, first, last, text, names[id(function)], frozenset(cues), frozenset(calls & cues)))
    return sorted(found, key=lambda statement: statement.first)


def lab_statements(chapter: Chapter, lab: Lab, interface: frozenset[str] = frozenset()) -> list[Statement]:
    """The statements of the lab's code (what its last hint rung shows) that the learner writes."""
    if not lab.hints:
        return []
    shown: dict[str, set[int]] = {}
    for name, code in rung_excerpts(lab.hints[-1]):
        path = chapter.target / name
        if path.is_file():
            shown.setdefault(name, set()).update(_shown_line_numbers(code, path.read_text(encoding="utf-8")))
    found: list[Statement] = []
    for name, numbers in shown.items():
        parent = chapter.parent / name
        before = parent.read_text(encoding="utf-8") if parent.is_file() else ""
        found += file_statements(name, (chapter.target / name).read_text(encoding="utf-8"), before, numbers, interface)
    return found


# The lesson's passages ---------------------------------------------------------------------


@frozen
class Passage:
    """A paragraph, a whole list or a sketch block of the lesson: the code it shows, its words."""

    line: int  # 1-based, in the lesson
    code: str  # its inline code spans (less those the interface holds), or the whole sketch
    words: frozenset[str]  # the prose's own words, lowercased


LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
WORD = re.compile(r"[A-Za-z]+")


def _without_card(lines: list[str]) -> list[str]:
    """The lesson's lines with the generated card blanked (it restates chapter.toml, not steps)."""
    result, inside = [], False
    for line in lines:
        if line.strip() == CARD_BEGIN:
            inside = True
        result.append("" if inside else line)
        if line.strip() == CARD_END:
            inside = False
    return result


def _prose_passage(start: int, lines: list[str], interface: frozenset[str]) -> Passage:
    prose = "\n".join(lines)
    spans = [match.group(2).strip() for match in CODE_SPAN.finditer(prose)]
    code = [span for span in spans if not _held(span.strip('"'), interface)]
    words = frozenset(word.lower() for word in WORD.findall(CODE_SPAN.sub(" ", prose)))
    return Passage(start, "\n".join(code), words)


SIGNATURE = re.compile(r"^\s*(?:async\s+def|def|class|@)\b")


def _without_signatures(lines: list[str]) -> list[str]:
    """A sketch's lines, each `def`, `class` or decorator line reduced to its comment:
    a signature is the contract, what a comment beside it says may be a step."""
    return [line.split("#", 1)[1] if SIGNATURE.match(line) and "#" in line else "" if SIGNATURE.match(line) else line
            for line in lines]


def passages(text: str, interface: frozenset[str] = frozenset()) -> list[Passage]:
    """The lesson's prose passages (paragraphs; a list is one passage, over blank lines too) and
    its `# not-run:` sketches. Runnable examples, transcripts and `# file:` excerpts are left
    out: they show what code does, and the copy share reads excerpts line by line."""
    lines = _without_card(text.split("\n"))
    found: list[Passage] = []
    current: list[str] = []
    start = 0
    in_list = False

    def close() -> None:
        nonlocal current
        if any(line.strip() for line in current):
            found.append(_prose_passage(start + 1, current, interface))
        current = []

    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith("```"):
            close()
            in_list = False
            language = stripped[3:].strip()
            body_start = index + 1
            index += 1
            body = []
            while index < len(lines) and lines[index].strip() != "```":
                body.append(lines[index])
                index += 1
            if language == "python" and body and body[0].strip().startswith(NOT_RUN):
                sketch = "\n".join(_without_signatures(body[1:]))
                words = frozenset(word.lower() for word in WORD.findall(sketch))
                found.append(Passage(body_start + 1, sketch, words))
            index += 1
            continue
        if not stripped:
            following = next((later for later in lines[index + 1 :] if later.strip()), "")
            if in_list and (LIST_ITEM.match(following) or following.startswith("  ")):
                current.append(line)  # the list goes on
            else:
                close()
                in_list = False
        elif stripped.startswith("#") or stripped.startswith("<details") or stripped.startswith("</details"):
            close()
            in_list = False
        else:
            if not current:
                start = index
                in_list = bool(LIST_ITEM.match(line))
            current.append(line)
        index += 1
    close()
    return found


def _shows(code: str, cue: str) -> bool:
    """Does the text show the cue as a whole word (a string cue: its text, quoted or not)?"""
    text = cue[1:-1] if len(cue) > 1 and cue.startswith('"') and cue.endswith('"') else cue
    if not text:
        return False
    return re.search(r"(?<![\w])" + re.escape(text) + r"(?![\w])", code) is not None


ENDINGS = ("", "s", "es", "ed", "d", "ing", "e", "er")


def _said(words: frozenset[str], cue: str) -> bool:
    """A plain lowercase cue said in words: `flush` by flush, flushes, flushed, flushing."""
    if not (cue.isalpha() and cue.islower() and len(cue) >= MIN_WORD):
        return False
    stem = cue[:-1] if cue.endswith("e") else cue
    return any(word.startswith(stem) and word[len(stem) :] in ENDINGS for word in words)


def shown_cues(passage: Passage, cues: frozenset[str]) -> set[str]:
    """The cues the passage shows, as code or in words."""
    return {cue for cue in cues if _shows(passage.code, cue) or _said(passage.words, cue)}


def narrates(shown: set[str], statement: Statement) -> bool:
    """At least half of the statement's cues, and at least one, are among those shown."""
    hits = len(statement.cues & shown)
    return hits > 0 and hits * 2 >= len(statement.cues)


# The measure -------------------------------------------------------------------------------


@frozen
class Given:
    """One statement of a lab the lesson gives away, and how."""

    statement: Statement
    how: str  # "printed" or "narrated at lesson line N"


@frozen
class LabDepth:
    """How much of one lab's code the lesson gives away."""

    lab: str
    total: int
    given: tuple[Given, ...]
    functions: tuple[tuple[str, int, int], ...]  # (function, given, total), worst first

    @property
    def share(self) -> float:
        return len(self.given) / self.total if self.total else 0.0

    @property
    def percent(self) -> float:
        return round(100 * self.share, 1)

    @property
    def over(self) -> bool:
        return self.share > GIVEAWAY_GOAL

    @property
    def worst(self) -> str:
        if not self.functions:
            return "none"
        name, given, total = self.functions[0]
        return f"{name}() ({given} of {total} statements)"


def _printed(statement: Statement, verbatim: Counter[str]) -> bool:
    """Every line of the statement is in the lesson's code blocks (each lesson line used once)."""
    needed = Counter(line for line in statement.text.split("\n") if line)
    if any(verbatim[line] < count for line, count in needed.items()):
        return False
    verbatim.subtract(needed)
    return True


def lab_depth(chapter: Chapter, lab: Lab, lesson: str | None = None) -> LabDepth:
    """The lab's statements, and which of them the lesson prints or narrates."""
    from course.dev.lessons import lesson_code_lines  # the copy share's reading of code blocks

    text = lesson if lesson is not None else chapter.lesson.read_text(encoding="utf-8")
    interface = test_strings(chapter)
    statements = lab_statements(chapter, lab, interface)
    found = passages(text, interface)
    by_function: dict[str, list[Statement]] = {}
    for statement in statements:
        by_function.setdefault(statement.function, []).append(statement)
    narrated: dict[str, int] = {}
    for members in by_function.values():
        cues = frozenset().union(*(statement.cues for statement in members))
        calls = frozenset().union(*(statement.calls for statement in members))
        for passage in found:
            shown = shown_cues(passage, cues)
            if len(shown) < MIN_NAMES or len(shown & calls) < MIN_CALLS:
                continue
            hits = [statement for statement in members if narrates(shown, statement)]
            if len(hits) >= MIN_STEPS:
                for statement in hits:
                    narrated.setdefault(statement.where, passage.line)
    verbatim = lesson_code_lines(text)
    given: list[Given] = []
    for statement in statements:
        if _printed(statement, verbatim):
            given.append(Given(statement, "printed"))
        elif statement.where in narrated:
            given.append(Given(statement, f"narrated at lesson line {narrated[statement.where]}"))
    given_at = {item.statement.where for item in given}
    counts = [
        (function, sum(1 for statement in members if statement.where in given_at), len(members))
        for function, members in by_function.items()
    ]
    counts.sort(key=lambda item: (-item[1] / item[2], -item[1], item[0]))
    return LabDepth(lab.id, len(statements), tuple(given), tuple(counts))


def chapter_depths(chapter: Chapter) -> list[LabDepth]:
    """Every lab's give-away share (a lab with no last-rung code has none to give away)."""
    text = chapter.lesson.read_text(encoding="utf-8")
    return [lab_depth(chapter, lab, text) for lab in chapter.labs]
