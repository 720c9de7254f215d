"""A failure a learner can read: the test, the line pytest points at, the error, where to fix it.

pytest's full report is written for people who know pytest's internals; a
learner needs a few lines. The digest is built from the traceback text pytest
reports for each test (TestCase.details, sent by the run host), which comes in
two layouts: pytest's own (`>` marks the line, `E` the error, `file.py:NN: Error` the place) and
Python's (`File "...", line NN, in f`), which pytest uses for exception
groups. Both are read into frames; a group with a single exception (trio's
nurseries wrap every error in one) is shown as that exception. A live test
quotes its child's traceback in its assertion message (`E` lines): those
frames count too, so the pointer names the file the child's traceback names.
"""

from __future__ import annotations

import ast
import re
import tomllib

from attrs import frozen

from course.catalog import Chapter, Lab
from course.hints import lab_files
from course.results import CRASHED, FAILED, NOT_RUN, PASSED, TIMEOUT, RunResult, TestCase

_PYTEST_PLACE = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+):(?: (?P<error>.*))?$")
_PYTHON_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_ERROR_LINE = re.compile(r"^E(?: |$)")  # pytest's error lines; a quoted traceback's lines follow the `E`
_EXCEPTION = re.compile(r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Group|Exit|Interrupt|Warning|Failed|Timeout\w*)?)(?:: (?P<text>.*))?$")
_GROUP_BORDER = re.compile(r"^\s*\+[-+ \d.]*$")
_GROUP_BAR = re.compile(r"^\s*\| ?")
_SUB_EXCEPTIONS = re.compile(r"\((?P<count>\d+) sub-exceptions?\)")
_SINGLE = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\) \[single exception in \w*ExceptionGroup\]$", re.S)
_MISSING_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")
_MISSING_NAME = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")
# pytest's own advice is about pytest's flags; the course has its own -v (see the CLI).
_PYTEST_ADVICE = ("Use -v to get more diff", "Use -v to get the full diff")
PACKAGE = "tiny_pi/"
LINE_LIMIT = 240


@frozen
class Frame:
    """One place in a traceback: a file relative to the practice dir, a line, its source."""

    file: str
    line: int
    source: str = ""

    @property
    def place(self) -> str:
        return f"{self.file}:{self.line}"


def first_failure(run: RunResult, lab: Lab | None = None) -> TestCase | None:
    """The first test that failed; with `lab`, the first of that lab's (or a file that failed to import).

    One run of the focused files answers `course test --lab`, so another lab's
    failure is in it too; the learner asked about this lab, and is shown its own.
    """
    for case in run.tests:
        if case.outcome not in (FAILED, "error"):
            continue
        if lab is None or not case.name or lab.selects(case.node_id):
            return case
    return None


@frozen
class Prediction:
    """One prediction of an observe chapter and its test's verdict on it."""

    key: str
    node_id: str
    outcome: str
    message: str  # the test's own failure message ("" when it passed)

    @property
    def right(self) -> bool:
        return self.outcome == PASSED

    def to_json(self) -> dict[str, object]:
        return {"key": self.key, "right": self.right, "outcome": self.outcome, "message": self.message}


def prediction_keys(chapter: Chapter) -> list[str]:
    """The keys of an observe chapter's blank starter TOML files: the predictions a learner writes.

    Read from the chapter's parent (the blanks themselves), never from the
    learner's copy, which may be half written or not valid TOML yet.
    """
    keys: list[str] = []
    for name, path in chapter.practice_blanks.items():
        if not name.endswith(".toml"):
            continue
        try:
            keys += [key for key in tomllib.loads(path.read_text(encoding="utf-8")) if key not in keys]
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return keys


def predictions(run: RunResult, chapter: Chapter, lab: Lab | None = None) -> list[Prediction]:
    """Each prediction the run checked (of `lab`, when given), in the order of the blank file.

    A prediction's test is the one parametrized by its key (`test_x_prediction[key]`).
    """
    found = []
    for key in prediction_keys(chapter):
        case = next((c for c in run.tests if c.name.endswith(f"[{key}]")), None)
        if case is None or (lab is not None and not lab.selects(case.node_id)):
            continue
        message = "" if case.outcome == PASSED else readable_message(case.message).removeprefix("Failed: ")
        if not message and case.outcome != PASSED:
            message = "not run" if case.outcome == NOT_RUN else case.outcome
        found.append(Prediction(key, case.node_id, case.outcome, message))
    return found


def observed_predictions(run: RunResult | None, chapter: Chapter, lab: Lab | None = None) -> list[Prediction]:
    """The predictions an observe chapter's run judged; none for a rebuild chapter or without a run."""
    if run is None or chapter.mode != "observe":
        return []
    return predictions(run, chapter, lab)


def relative(path: str) -> str:
    """`/any/where/p02/tiny_pi/x.py` -> `tiny_pi/x.py`; a test file -> `tests/...`."""
    for marker in ("/" + PACKAGE, "/tests/"):
        at = path.rfind(marker)
        if at >= 0:
            return path[at + 1:]
    return path


def _unboxed(details: str) -> list[str]:
    """The traceback text without exception-group boxes (`| ` bars and `+---` borders)."""
    lines = []
    for line in details.splitlines():
        if _GROUP_BORDER.match(line):
            continue
        lines.append(_GROUP_BAR.sub("", line, count=1) if _GROUP_BAR.match(line) else line)
    return lines


def frames(details: str) -> list[Frame]:
    """Every frame of the traceback, outermost first, in either layout; a quoted child's frames last."""
    found: list[Frame] = []
    inner: list[Frame] = []  # a quoted child's frames: inside the test, so after its own
    lines = _unboxed(details)
    marked = ""
    for index, line in enumerate(lines):
        if line.startswith(">"):
            marked = line[1:].strip()
            continue
        place = _PYTEST_PLACE.match(line)
        if place:
            found.append(Frame(relative(place.group("file")), int(place.group("line")), marked))
            marked = ""
            continue
        quoted = _ERROR_LINE.match(line) is not None  # a child's traceback, quoted in an assertion message
        frame = _PYTHON_FRAME.match(line[1:] if quoted else line)
        if frame:
            following = lines[index + 1] if index + 1 < len(lines) else ""
            source = (following[1:] if quoted and _ERROR_LINE.match(following) else following).strip()
            (inner if quoted else found).append(Frame(relative(frame.group("file")), int(frame.group("line")), source))
    return [f for f in found + inner if "site-packages/" not in f.file and not f.file.startswith("/")]


def error_lines(details: str, message: str) -> list[str]:
    """The error as pytest shows it (`E` lines), the innermost exception of a group unwrapped."""
    lines = _unboxed(details)
    marked = [line.rstrip() for line in lines if line.startswith("E ")]
    if marked and not any("ExceptionGroup" in line for line in marked[:1]):
        return _without_advice(marked)
    # Python's layout: the last exception line after the last frame, and what continues it.
    last_frame = max((i for i, line in enumerate(lines) if _PYTHON_FRAME.match(line)), default=-1)
    tail = lines[last_frame + 2:] if last_frame >= 0 else []
    for index, line in enumerate(tail):
        match = _EXCEPTION.match(line)
        if match and not line.startswith(" "):
            block = [line.rstrip()] + [rest.rstrip() for rest in tail[index + 1:] if rest.startswith(" ") or not rest]
            return _without_advice([f"E   {text}" if text.strip() else "E" for text in block])
    return _without_advice([f"E   {text}" for text in readable_message(message).splitlines()])


def _without_advice(lines: list[str]) -> list[str]:
    kept = [line for line in lines if not any(advice in line for advice in _PYTEST_ADVICE)]
    while kept and kept[-1].strip() in ("E", ""):
        kept.pop()
    return kept


def readable_message(message: str) -> str:
    """A one-line exception message with real newlines: `Error("a\\nb") [single exception in ExceptionGroup]` -> `Error: a\\nb`."""
    match = _SINGLE.match(message.strip())
    if match is None:
        return message
    try:
        value = ast.literal_eval(match.group("args"))
    except (ValueError, SyntaxError):
        return f"{match.group('name')}: {match.group('args')}"
    return f"{match.group('name')}: {value}"


def group_size(details: str) -> int:
    """How many exceptions a group held (1 when there was no group)."""
    counts = [int(m.group("count")) for m in _SUB_EXCEPTIONS.finditer(details)]
    return max(counts, default=1)


def fix_pointer(chapter: Chapter, found: list[Frame], lab: Lab | None = None) -> list[str]:
    """Where the fix belongs: this chapter's teaching file, and where the error surfaced if elsewhere.

    When no frame is in the learner's code, the failing test's lab narrows the
    chapter's teaching files to the ones that lab's code goes in.
    """
    if chapter.mode == "observe":
        # The learner of an observe chapter writes only the starter files; the module is the finished target.
        files = ", ".join(chapter.starter_files)
        return [f"the fix belongs in {files}, all you write in an observe chapter "
                "(`git diff` shows any other change of yours)"] if files else []
    mine = [f for f in found if f.file.startswith(PACKAGE)]
    teaching = [f for f in mine if f.file in chapter.teaching_files]
    if teaching:
        lines = [f"in your code: {teaching[-1].place}" + (f": {teaching[-1].source}" if teaching[-1].source else "")]
        if mine[-1] != teaching[-1]:
            lines.append(f"  (it surfaced in {mine[-1].place}, code of an earlier chapter)")
        return lines
    named = [name for name in lab_files(lab) if name in chapter.teaching_files] if lab is not None else []
    owner = f"lab {lab.id}'s" if named and lab is not None else "this chapter's"
    chosen = named or list(chapter.teaching_files)
    files = ", ".join(chosen)
    noun = f"{owner} teaching file" if len(chosen) == 1 else f"{owner} teaching files"
    if mine:
        return [f"the fix belongs in {files} ({noun}); it surfaced in {mine[-1].place}, code of an earlier chapter"]
    return [f"the fix belongs in {files} ({noun})"] if files else []


def digest(run: RunResult, chapter: Chapter, max_lines: int = 14, lab: Lab | None = None) -> list[str]:
    """A few lines: which test failed first (of `lab`, when given), the line pytest points at, the error, where to fix it."""
    if run.outcome == TIMEOUT:
        return [run.summary()]
    case = first_failure(run, lab)
    if case is None and run.outcome == CRASHED:
        return [run.summary()]
    if case is None:
        return [line for line in run.output.strip().splitlines()[-5:]]
    found = frames(case.details)
    if case.name:
        phases = case.phases()
        lines = [f"first failure: {case.node_id}" + (f" ({phases})" if phases else "")]
        in_test = [f for f in found if f.file == case.file]
        if in_test:
            lines.append(in_test[-1].place)
            if in_test[-1].source:
                lines.append(f">   {in_test[-1].source}")
    else:
        lines = [f"could not import the tests in {case.file}"]
    errors = error_lines(case.details, case.message)
    size = group_size(case.details)
    if size > 1:
        lines.append(f"({size} errors at once, in an exception group; the first:)")
    lines += shown_errors(errors, max(2, max_lines - len(lines) - 2))
    hint = import_hint(case.details or case.message, chapter)
    if hint:
        lines.append(hint)
    elif case.name:
        lab = next((lab for lab in chapter.labs if lab.selects(case.node_id)), None)
        lines += fix_pointer(chapter, found, lab)
    return [_clip(line) for line in lines]


def shown_errors(errors: list[str], room: int) -> list[str]:
    """At most `room` error lines: the first two, then the end, where a quoted child's own error is.

    A live test's message quotes what its child printed, the child's error
    last; pytest adds its `assert` lines after it. When a quoted traceback
    is there, the lines shown end at its exception line, else at the end.
    """
    if len(errors) <= room:
        return errors
    end = len(errors)
    frame_lines = [i for i, line in enumerate(errors) if _PYTHON_FRAME.match(line[1:])]
    if frame_lines:  # the quoted exception: the first unindented-looking error line after the last frame
        after = range(frame_lines[-1] + 2, len(errors))
        end = next((i + 1 for i in after if _EXCEPTION.match(errors[i][1:].strip()) and ":" in errors[i]), end)
    tail = errors[max(2, end - (room - 3)):end]
    cut = len(errors) - 2 - len(tail)
    return errors[:2] + [f"E   ... ({cut} lines not shown; `course test -v` shows them all)"] + tail


def _clip(line: str) -> str:
    """A digest is read, not scrolled: a 100 kB assertion message shows its start and its size."""
    if len(line) <= LINE_LIMIT:
        return line
    return f"{line[:LINE_LIMIT]}... [{len(line) - LINE_LIMIT} more characters]"


def import_hint(text: str, chapter: Chapter) -> str | None:
    """When an import fails, name the teaching file where the missing piece belongs."""
    match = _MISSING_NAME.search(text) or _MISSING_MODULE.search(text)
    if match is None:
        return None
    module = match.group("module")
    if module.partition(".")[0] != PACKAGE.rstrip("/"):
        if match.groupdict().get("name"):  # the library is there; a name in it is not
            return None
        return (f"hint: {module} is not installed in the Python that runs `course`; install the course "
                "into it (`python -m pip install -e .` in the course checkout)")
    path = module.replace(".", "/") + ".py"
    package = module.replace(".", "/") + "/__init__.py"
    owner = next((f for f in chapter.teaching_files if f in (path, package)), None)
    if owner is None:
        return None
    if "name" in match.groupdict() and match.groupdict().get("name"):
        return f"hint: `{match.group('name')}` belongs in {owner}, a teaching file of this chapter"
    return f"hint: create {owner}, a teaching file of this chapter"


def tests_by_lab(run: RunResult, chapter: Chapter, only: Lab | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per lab (then the rest), each test's name and outcome: "which tests are already green?".

    `only` keeps one lab's group: `course test --lab` asks about that lab alone.
    """
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    placed: set[int] = set()
    for lab in chapter.labs if only is None else [only]:
        rows = []
        for index, case in enumerate(run.tests):
            if case.name and lab.selects(case.node_id):
                rows.append((_listed(case), case.outcome))
                placed.add(index)
        groups.append((f"lab {lab.id} {lab.title}", rows))
    rest = [(_listed(c) if c.name else c.file, c.outcome) for i, c in enumerate(run.tests) if i not in placed]
    if rest and only is None:
        groups.append(("not in a lab", rest))
    return groups


def _listed(case: TestCase) -> str:
    """A test's name in a list, with how its phases went when its setup or teardown failed."""
    name = case.name.rpartition(".")[2]
    phases = case.phases()
    return f"{name} ({phases})" if phases else name
