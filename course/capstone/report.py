"""The capstone's report: counts and codes, as lines for people and as one JSON document.

Neither ever holds a case: no seed, no file name, no path of a case, no
secret, no call id, no output of the learner's agent. A command that ended
badly is named with how it ended (`tiny_pi.agent: NotImplementedError`):
the command, its exit status and its exception's class, never the
exception's message, which may quote a case. What each code means is in
the legend, in words that describe the invariant, never the case; a
family's codes come likeliest cause first.
"""

from __future__ import annotations

from typing import Any, Sequence

from course.capstone.families import FAMILIES
from course.capstone.records import COMMON_CODES, RUN_CODES, CapstoneReport, Family, FamilyResult
from course.catalog import chapter_nn

SCHEMA_VERSION = 1
FIRST_CAUSE = ("A family's codes come likeliest cause first: the first often explains the others "
               "(a command that crashed, E-EXIT with an exception, also loses its results).")


def meanings(families: Sequence[Family] = FAMILIES) -> dict[str, str]:
    """Every code a run can report, and what it means."""
    found = dict(COMMON_CODES)
    for family in families:
        found.update(family.codes)
    found.update(RUN_CODES)
    return found


def reported_codes(report: CapstoneReport) -> list[str]:
    """The codes the run reported, each once, in the order of the families."""
    codes = [code for result in report.families for code in result.codes] + list(report.run_codes)
    return list(dict.fromkeys(codes))


def shown_code(result: FamilyResult, code: str) -> str:
    """A code as a family line shows it: E-EXIT and E-TIMEOUT with the commands behind them."""
    commands = list(dict.fromkeys(ending.brief() for ending in result.endings if ending.code == code))
    return f"{code} ({'; '.join(commands)})" if commands else code


def endings_said(report: CapstoneReport) -> dict[str, list[str]]:
    """Each command's ending in words, once, with the families it ended that way in."""
    found: dict[str, list[str]] = {}
    for result in report.families:
        for ending in result.endings:
            names = found.setdefault(ending.said(), [])
            if result.name not in names:
                names.append(result.name)
    return found


def family_line(result: FamilyResult, width: int) -> str:
    name = f"{result.name:<{width}}  {chapter_nn(result.chapter)}"
    if not result.examined:
        return f"  {name}  {result.not_examined}"
    codes = f"  [{' '.join(shown_code(result, code) for code in result.codes)}]" if result.codes else ""
    return f"  {name}  {result.passed}/{result.total}{codes}"


def lines(report: CapstoneReport, shown_directory: str, seeded: bool = False, shipped: str | None = None) -> list[str]:
    """The report for people: a line per family (with its chapter), the legend of the codes found, a summary.
    `seeded`: the cases were drawn again from a seed the author gave, not afresh; `shipped`: the chapter whose
    target the code is, byte for byte."""
    width = max(len(result.name) for result in report.families)
    drawn = "cases drawn again from the seed given" if seeded else "cases drawn afresh"
    out = [f"Capstone of {shown_directory} ({report.chapter}), {drawn}; "
           f"the code examined: tiny_pi/ with sha256 {report.digest[:16]}"]
    if shipped is not None:
        out.append(f"This tiny_pi/ is chapter {shipped}'s target byte for byte: the course's own answer, not yours.")
    out += [family_line(result, width) for result in report.families]
    codes = reported_codes(report)
    if codes:
        known = meanings()
        out.append("What the codes mean:")
        out += [f"  {code}: {known.get(code, 'see docs/classroom.md')}" for code in codes]
        out += [f"  {', '.join(names)}: {said}" for said, names in endings_said(report).items()]
        if any(len(result.codes) > 1 for result in report.families):
            out.append(f"  {FIRST_CAUSE}")
    if report.run_codes:
        out.append("The frozen copy of the code changed during the run, so these results do not count.")
    examined = report.examined
    passed = sum(result.ok for result in examined)
    left = len(report.families) - len(examined)
    verdict = "Capstone passed" if report.ok else "Capstone NOT passed"
    out.append(f"{verdict}: {passed} of {len(examined)} families examined passed"
               f"{f' ({left} not examined)' if left else ''}, in {report.duration:.1f} s. "
               "Each run draws new cases; the codes say what broke, never where.")
    return out


def document(report: CapstoneReport, course_version: str | None = None, shipped: str | None = None) -> dict[str, Any]:
    """The same counts and codes for machines (docs/course-capstone.schema.json)."""
    known = meanings()
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "capstone",
        "course_version": course_version,
        "started": report.started,
        "ok": report.ok,
        "directory": str(report.directory.absolute()),
        "chapter": report.chapter,
        "code_sha256": report.digest,
        "shipped_answer": shipped,
        "passed_families": sum(result.ok for result in report.examined),
        "examined_families": len(report.examined),
        "families": [family_json(result) for result in report.families],
        "run_codes": list(report.run_codes),
        "legend": {code: known.get(code, "") for code in reported_codes(report)},
        "duration": round(report.duration, 3),
    }


def family_json(result: FamilyResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "chapter": chapter_nn(result.chapter),
        "examined": result.examined,
        "ok": result.ok,
        "passed": result.passed,
        "total": result.total,
        "codes": list(result.codes),
        "endings": [{"code": ending.code, "command": ending.command, "status": ending.status,
                     "expected": list(ending.expected), "exception": ending.exception} for ending in result.endings],
        "reason": result.not_examined,
    }
