"""Lesson code blocks, checked against the target so text and code cannot drift apart,
and the lesson's depth: how much it leaves the learner to write, and what it never says.

A fenced `python` block is one of three things (see checkpoints/README.md):
an excerpt (`# file: path` on its first line) that must appear verbatim in
the target; a sketch (`# not-run: reason`) that must at least compile; or a
runnable example that runs inside a copy of the target, whose standard
output must equal a following ```text block that starts with `# output`.

Three measures keep a lesson from becoming a transcription exercise or a
guessing game (all read files only, so `course verify` runs them on every
chapter):

- the copy share: of the new teaching-file lines (in target, not in parent;
  blank lines, comments and docstrings left out), the share that appears
  verbatim, as a whole stripped line, in the lesson's fenced blocks;
- the unstated messages: message texts a focused test checks (`match=`,
  `"..." in str(...)`, `.error_message == "..."`) that neither the lesson
  nor a hint states;
- the last hint rungs: each lab's last rung holds the full bodies of its
  core functions as `# file:` excerpts, matched against the target.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from attrs import frozen

from course.catalog import Chapter
from course.hints import EXCERPT, excerpt_chunks, rung_excerpts
from course.run_env import run_environment
from course.workspace import scratch_copy

NOT_RUN = "# not-run:"
OUTPUT = "# output"


@frozen
class Block:
    """One fenced code block of a lesson."""

    language: str
    line: int
    code: str
    expected_output: str | None = None

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0].strip()

    @property
    def kind(self) -> str:
        if self.first_line.startswith(EXCERPT):
            return "excerpt"
        if self.first_line.startswith(NOT_RUN):
            return "not-run"
        return "runnable"


def fenced(text: str) -> list[tuple[str, int, str]]:
    """Every fenced block of a markdown text: (language, first line number, code)."""
    raw: list[tuple[str, int, str]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if stripped.startswith("```") and len(stripped) > 3:
            fence_indent = len(lines[index]) - len(lines[index].lstrip())
            language = stripped[3:].split()[0] if stripped[3:].split() else ""
            start = index + 1
            index += 1
            body = []
            while index < len(lines) and lines[index].strip() != "```":
                body.append(lines[index][fence_indent:])
                index += 1
            raw.append((language, start, "\n".join(body) + "\n"))
        index += 1
    return raw


def blocks(text: str) -> list[Block]:
    """The fenced python blocks of a markdown text, with each one's expected output."""
    raw = fenced(text)
    result = []
    for position, (language, start, code) in enumerate(raw):
        if language != "python":
            continue
        expected = None
        if position + 1 < len(raw):
            next_language, _, next_code = raw[position + 1]
            if next_language == "text" and next_code.startswith(OUTPUT):
                expected = next_code.split("\n", 1)[1] if "\n" in next_code else ""
        result.append(Block(language, start, code, expected))
    return result


def check_excerpt(block: Block, target: Path) -> str | None:
    """None when the excerpt appears verbatim in its file, else what is wrong."""
    name = block.first_line[len(EXCERPT) :].strip()
    path = target / name
    if not path.is_file():
        return f"line {block.line}: excerpt of {name}, which is not in the target"
    body = block.code.split("\n", 1)[1].rstrip("\n")
    if body and body not in path.read_text(encoding="utf-8"):
        return f"line {block.line}: this excerpt no longer matches {name} in the target"
    return None


def check_compiles(block: Block) -> str | None:
    try:
        compile(block.code, f"<lesson line {block.line}>", "exec")
    except SyntaxError as error:
        return f"line {block.line}: does not compile: {error}"
    return None


# Runnable examples all run in one fresh interpreter, each in a fresh namespace,
# so thirty examples cost one start-up instead of thirty.
_RUN_EXAMPLES = r"""
import contextlib, io, json, sys, traceback
sys.path.insert(0, ".")
results = []
for code in json.load(sys.stdin):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<example>", "exec"), {"__name__": "__main__"})
        results.append({"ok": True, "stdout": out.getvalue()})
    except BaseException:
        results.append({"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc(limit=4)})
sys.__stdout__.write(json.dumps(results))
"""


def check_runnable(examples: list[Block], target: Path, time_limit: float = 120) -> list[str]:
    """Run every example against a copy of `target`; describe each that fails."""
    if not examples:
        return []
    with scratch_copy(target, "lesson") as copy:
        process = subprocess.run(
            [sys.executable, "-c", _RUN_EXAMPLES],
            input=json.dumps([block.code for block in examples]),
            cwd=copy,
            env=run_environment(),
            capture_output=True,
            text=True,
            timeout=time_limit,
        )
    try:
        results = json.loads(process.stdout)
    except ValueError:
        return [f"the examples did not run: {process.stderr[-2000:]}"]
    problems = []
    for block, result in zip(examples, results):
        if not result["ok"]:
            problems.append(f"line {block.line}: the example raised:\n{result['error']}")
        elif block.expected_output is not None and result["stdout"] != block.expected_output:
            problems.append(
                f"line {block.line}: the example printed {result['stdout']!r}, "
                f"the lesson shows {block.expected_output!r}"
            )
    return problems


def lesson_problems(chapter: Chapter) -> list[str]:
    """Every way the lesson's code disagrees with the chapter's target."""
    found = blocks(chapter.lesson.read_text(encoding="utf-8"))
    problems = []
    for block in found:
        if block.kind == "excerpt":
            problem = check_excerpt(block, chapter.target)
        else:
            problem = check_compiles(block)
        if problem:
            problems.append(problem)
    runnable = [block for block in found if block.kind == "runnable"]
    problems += check_runnable(runnable, chapter.target)
    return [f"{chapter.lesson}: {problem}" for problem in problems]


# Depth: the copy share ---------------------------------------------------------------

COPY_SHARE_GOAL = 0.35
LESSON_LINE_LIMIT = 900


def _docstring_lines(source: str) -> set[int]:
    """1-based numbers of the lines that belong to a module, class or function docstring."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    numbers: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                numbers.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return numbers


def new_code_lines(parent_text: str, target_text: str) -> list[str]:
    """The target's lines that the parent does not have, stripped; blank lines,
    comment lines and docstring lines are not code a learner has to find."""
    old = parent_text.splitlines()
    new = target_text.splitlines()
    docstrings = _docstring_lines(target_text)
    added: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            for index in range(start, end):
                line = new[index].strip()
                if line and not line.startswith("#") and index + 1 not in docstrings:
                    added.append(line)
    return added


@frozen
class CopyShare:
    """How many of a chapter's new teaching-file lines the lesson prints verbatim."""

    copied: int
    total: int
    copied_lines: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.copied / self.total if self.total else 0.0

    @property
    def percent(self) -> float:
        return round(100 * self.share, 1)


def lesson_code_lines(text: str) -> Counter[str]:
    """Every stripped, non-blank line of the lesson's fenced blocks, with its count."""
    lines: Counter[str] = Counter()
    for _, _, code in fenced(text):
        lines.update(line.strip() for line in code.splitlines() if line.strip())
    return lines


def copy_share(chapter: Chapter) -> CopyShare:
    """Each lesson line can account for as many target lines as it occurs in the lesson,
    so a lone `return None` in a sketch does not count for every `return None` in the code."""
    available = lesson_code_lines(chapter.lesson.read_text(encoding="utf-8"))
    copied: list[str] = []
    total = 0
    for name in chapter.teaching_files:
        target = chapter.target / name
        if not target.is_file():
            continue
        parent = chapter.parent / name
        before = parent.read_text(encoding="utf-8") if parent.is_file() else ""
        for line in new_code_lines(before, target.read_text(encoding="utf-8")):
            total += 1
            if available[line] > 0:
                available[line] -= 1
                copied.append(line)
    return CopyShare(copied=len(copied), total=total, copied_lines=tuple(copied))


# Depth: message texts the tests check --------------------------------------------------

MESSAGE_ATTRIBUTES = ("error_message", "message")


@frozen
class TestedMessage:
    """A message text a focused test checks: exactly, as a substring or as a `match=` pattern."""

    text: str
    how: str  # "equals", "contains" or "matches"
    test_file: str
    line: int

    def stated_in(self, corpus: str) -> bool:
        if self.how == "matches":
            try:
                return re.search(self.text, corpus) is not None
            except re.error:
                return self.text in corpus
        return _normalize(self.text) in corpus


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _is_message_source(node: ast.expr) -> bool:
    """`str(error)`, `str(raised.value)`, `x.error_message`, `x.message` or `x.args[0]`:
    where a message is read (not `str(request.url)`)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
        argument = node.args[0]
        return isinstance(argument, ast.Name) or (isinstance(argument, ast.Attribute) and argument.attr == "value")
    if isinstance(node, ast.Attribute) and node.attr in MESSAGE_ATTRIBUTES:
        return True
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "args"
    )


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def _element_strings(container: ast.expr, position: int) -> list[str]:
    """Element `position` of every tuple in a dict's values or a list/tuple's items."""
    items: list[ast.expr] = []
    if isinstance(container, ast.Dict):
        items = [value for value in container.values if value is not None]
    elif isinstance(container, (ast.List, ast.Tuple)):
        items = list(container.elts)
    found: list[str] = []
    for item in items:
        if isinstance(item, ast.Tuple) and position < len(item.elts):
            found += _strings(item.elts[position])
        elif position == 0:
            found += _strings(item)
    return found


def _name_values(name: str, function: ast.FunctionDef | ast.AsyncFunctionDef, module: dict[str, ast.expr]) -> list[str]:
    """The strings a name in a test can hold: a parametrize argument, or an element
    unpacked from a module-level table (`wire, expected = MALFORMED[case]`)."""
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
            continue
        if decorator.func.attr != "parametrize" or len(decorator.args) < 2:
            continue
        names = _strings(decorator.args[0])
        if names:
            parts = [part.strip() for part in names[0].split(",")]
            if name in parts:
                return _element_strings(decorator.args[1], parts.index(name)) if len(parts) > 1 else _element_strings(decorator.args[1], 0)
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in module:
            table = module[value.value.id]
            if isinstance(target, ast.Tuple):
                for position, element in enumerate(target.elts):
                    if isinstance(element, ast.Name) and element.id == name:
                        return _element_strings(table, position)
            elif isinstance(target, ast.Name) and target.id == name:
                return _element_strings(table, 0)
    return []


def messages_in_tests(source: str, test_file: str) -> list[TestedMessage]:
    """Every message text the test source checks. A text that the test file also
    writes into its inputs (an error it feeds in and reads back) is an echo, not a demand."""
    tree = ast.parse(source)
    module = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    checked: list[tuple[ast.Constant | None, TestedMessage]] = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not function.name.startswith("test"):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "raises":
                for keyword in node.keywords:
                    if keyword.arg == "match" and _strings(keyword.value):
                        checked.append((None, TestedMessage(_strings(keyword.value)[0], "matches", test_file, node.lineno)))
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
                continue
            left, op, right = node.left, node.ops[0], node.comparators[0]
            if isinstance(op, ast.In) and _is_message_source(right):
                if isinstance(left, ast.Name):
                    for text in _name_values(left.id, function, module):
                        checked.append((None, TestedMessage(text, "contains", test_file, node.lineno)))
                elif isinstance(left, ast.Constant) and _strings(left):
                    checked.append((left, TestedMessage(left.value, "contains", test_file, node.lineno)))
            elif isinstance(op, ast.Eq):
                for source_side, text_side in ((left, right), (right, left)):
                    if _is_message_source(source_side) and isinstance(text_side, ast.Constant) and _strings(text_side):
                        checked.append((text_side, TestedMessage(text_side.value, "equals", test_file, node.lineno)))
    asserted = {id(constant) for constant, _ in checked if constant is not None}
    inputs = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in asserted
    ]
    found = {
        message
        for constant, message in checked
        if constant is None or not any(message.text in text for text in inputs)
    }
    return sorted(found, key=lambda message: (message.test_file, message.line, message.text))


def tested_messages(chapter: Chapter) -> list[TestedMessage]:
    found: list[TestedMessage] = []
    for name in chapter.focused_tests:
        path = chapter.target / name
        if path.is_file():
            found += messages_in_tests(path.read_text(encoding="utf-8"), name)
    return found


def unstated_messages(chapter: Chapter) -> list[TestedMessage]:
    """The tested message texts that neither the lesson nor any hint states."""
    corpus = _normalize(
        chapter.lesson.read_text(encoding="utf-8") + "\n" + "\n".join(hint for lab in chapter.labs for hint in lab.hints)
    )
    return [message for message in tested_messages(chapter) if not message.stated_in(corpus)]


# Depth: the last hint rung holds the full bodies -------------------------------------


def _functions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def whole_excerpt_problems(name: str, code: str, target: Path) -> list[str]:
    """Each chunk must appear verbatim, in order, in the target file, and every function
    whose `def` line it shows must be shown to its last line: the full body."""
    path = target / name
    if not path.is_file():
        return [f"shows {name}, which is not in the target"]
    source = path.read_text(encoding="utf-8")
    functions = _functions(source)
    problems = []
    position = 0
    for chunk in excerpt_chunks(code):
        found = source.find(chunk, position)
        if found < 0:
            first = chunk.split("\n", 1)[0].strip()
            problems.append(f"its code from {first!r} does not match {name} in the target (word for word, in order)")
            continue
        position = found + len(chunk)
        first_line = source.count("\n", 0, found) + 1
        last_line = first_line + chunk.count("\n")
        for function in functions:
            if first_line <= function.lineno <= last_line and (function.end_lineno or 0) > last_line:
                problems.append(f"shows only part of {function.name}() of {name}: a last rung holds whole functions")
    return problems


def rung_problems(chapter: Chapter) -> list[str]:
    """Each lab's last hint rung holds its core code, matched word for word against the target."""
    problems = []
    for lab in chapter.labs:
        if not lab.hints:
            problems.append(f"lab {lab.id} has no hints")
            continue
        excerpts = rung_excerpts(lab.hints[-1])
        if not excerpts:
            problems.append(f"lab {lab.id}: the last hint rung shows no code (a `{EXCERPT} PATH` line, then the functions)")
        for name, code in excerpts:
            problems += [f"lab {lab.id}: the last hint rung: {problem}" for problem in whole_excerpt_problems(name, code, chapter.target)]
    return problems


def lesson_length(chapter: Chapter) -> int:
    return len(chapter.lesson.read_text(encoding="utf-8").splitlines())
