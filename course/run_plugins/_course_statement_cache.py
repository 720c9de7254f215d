"""Make pytest's failure reports cheap in large test files, without changing a byte of them.

To show a failing line within its statement, pytest asks where that statement
starts and ends. Its answer walks the module's whole syntax tree once per
traceback entry, after parsing the module again for every failure. A parent
snapshot fails on purpose: chapter 05's parent fails 55 tests in a 1,000-line
file, and the run spent three of its five seconds walking that tree.

This plugin parses each source text once, keeps only the list of its
statement lines, and answers every entry with a binary search. The reports stay exactly what
plain pytest prints (tests/test_run_plugins.py compares them line by line).
It touches two private pytest functions; when they are not there (another
pytest), it changes nothing and runs are merely slower.
"""

from __future__ import annotations

import ast
import warnings
from bisect import bisect_right
from typing import Any

# Source text -> its statement lines. Only the numbers are kept, never the syntax
# trees: a few large trees alive for the whole session would slow every one of
# pytest's gc.collect() calls by more than the walks they save.
_known: dict[str, list[int]] = {}


class StatementLines(ast.AST):
    """What pytest gets instead of a module's syntax tree: only its statement lines.

    pytest keeps the tree it is handed for the next entry in the same file and
    passes it back; nothing but `statement_bounds` looks inside.
    """

    def __init__(self, starts: list[int]) -> None:
        super().__init__()
        self.starts = starts


# Statements only ever sit in these lists (of modules, statements, handlers and
# `case`s), never inside an expression: following them alone reaches every
# statement while skipping the expression nodes, most of a tree.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def statement_starts(tree: ast.AST) -> list[int]:
    """0-based lines where a statement (or what pytest treats as one) begins, sorted.

    A decorated def or class starts at its decorators; an `except` handler is
    a statement; so is the `else:`/`finally:` line before such a block.
    """
    starts: list[int] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.stmt | ast.ExceptHandler):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                starts += [decorator.lineno - 1 for decorator in node.decorator_list]
            starts.append(node.lineno - 1)
            for block in ("finalbody", "orelse"):
                body = getattr(node, block, None)
                if body:
                    starts.append(body[0].lineno - 2)
        for block in _BLOCKS:
            inner = getattr(node, block, None)
            if isinstance(inner, list):
                pending += inner
    starts.sort()
    return starts


def statement_bounds(lineno: int, node: ast.AST) -> tuple[int, int | None]:
    """The statement around 0-based `lineno`: its first line, and the next one's (None at the end)."""
    starts = node.starts if isinstance(node, StatementLines) else statement_starts(node)
    index = bisect_right(starts, lineno)
    return starts[index - 1], starts[index] if index < len(starts) else None


def _lines_of(text: str) -> StatementLines | None:
    starts = _known.get(text)
    if starts is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text, "source", "exec")
        except (SyntaxError, ValueError):
            return None  # pytest's own call parses it again and reports what it reports
        starts = _known[text] = statement_starts(tree)
    return StatementLines(starts)


def install() -> bool:
    """Patch pytest once; False (and nothing changed) when its internals are not as expected."""
    try:
        from _pytest._code import code, source
    except ImportError:
        return False
    original = getattr(code, "getstatementrange_ast", None)
    if original is None or not hasattr(source, "get_statement_startend2"):
        return False
    if getattr(original, "course_cached", False):
        return True

    def getstatementrange_ast(
        lineno: int, source_: Any, assertion: bool = False, astnode: ast.AST | None = None
    ) -> tuple[ast.AST, int, int]:
        if astnode is None:
            astnode = _lines_of(str(source_))
        return original(lineno, source_, assertion, astnode)

    getstatementrange_ast.course_cached = True  # type: ignore[attr-defined]
    code.getstatementrange_ast = getstatementrange_ast  # type: ignore[assignment]
    source.get_statement_startend2 = statement_bounds  # type: ignore[assignment]
    return True


def pytest_configure(config: Any) -> None:
    install()
