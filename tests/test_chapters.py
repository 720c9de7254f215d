"""Every real chapter: its story holds, its practice dir starts red (in observe mode: the
target's code with parent's blanks), its teaching-file list is complete, its lesson's code
agrees with its target."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest

from conftest import CHECKPOINTS, REPO, course, course_process, made_practice, tree_hash
from course.cards import render_card
from course.catalog import load_catalog
from course.dev.lessons import lesson_problems
from course.verdict_copy import verdict_copy
from course.workspace import IGNORED_NAMES

CATALOG = load_catalog(REPO)
CHAPTERS = {chapter.nn: chapter for chapter in CATALOG.chapters}
REBUILD = [nn for nn, chapter in CHAPTERS.items() if chapter.mode == "rebuild"]
OBSERVE = [nn for nn, chapter in CHAPTERS.items() if chapter.mode == "observe"]
# The quickstart's chapter (it has starter files as well as teaching files).
THROUGH_THE_CLI = "03" if "03" in REBUILD else REBUILD[0]


@pytest.fixture(scope="session")
def verify_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict]:
    """One fresh `course verify --json` of the real course, shared by the per-chapter checks below.

    Verify runs every chapter's story (the same checks as `course checkpoint NN`);
    running it once instead of one checkpoint per chapter saves a whole course's
    worth of runs, and an empty verdict store keeps it a real run.
    """
    cache = tmp_path_factory.mktemp("verify-report-cache")
    # The default number of runs at once: one chapter's slow runs must not hold up the rest.
    result = course("verify", "--json", env={"COURSE_CACHE": str(cache), "COURSE_JOBS": None})
    return result.returncode, json.loads(result.stdout)


# The first test of a worker to ask for verify_report pays for the whole course's proof.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("nn", CHAPTERS)
def test_every_check_of_the_chapters_story_holds(nn: str, verify_report: tuple[int, dict]) -> None:
    chapter = CHAPTERS[nn]
    checks = [check for check in verify_report[1]["checks"] if check["chapter"] == chapter.name]
    failed = [check for check in checks if not check["ok"]]
    assert failed == [], json.dumps(failed, indent=2)
    by_kind = {(check["kind"], check["lab"]): check for check in checks}
    assert ("first-red-light", None) in by_kind
    for lab in chapter.labs:
        expected = f"{lab.expected_passed}/{lab.expected_passed} passed"
        assert by_kind[("lab", lab.id)]["actual"] == expected, lab.id
    total = chapter.expected_passed
    assert by_kind[("focused", None)]["actual"] == f"{total}/{total} passed"
    proven = {check["name"].split()[1] for check in checks if check["kind"] == "redlight"}
    assert proven == {redlight.id for redlight in chapter.redlights}
    lesson_checks = {"lineage", "card", "messages", "hint-rungs", "lesson-length"}
    if chapter.mode == "rebuild":  # an observe chapter's learner writes nothing, so nothing can be copied
        lesson_checks.add("copy-share")
    assert lesson_checks <= {check["kind"] for check in checks}


@pytest.mark.timeout(1200)
def test_verify_proves_the_whole_course(verify_report: tuple[int, dict]) -> None:
    returncode, document = verify_report
    failed = [check for check in document["checks"] if not check["ok"]]
    assert returncode == 0, json.dumps(failed, indent=2)
    proven = {check["chapter"] for check in document["checks"]} - {"course"}
    assert proven == {chapter.name for chapter in CATALOG.chapters}
    assert [time["chapter"] for time in document["times"]] == [chapter.name for chapter in CATALOG.chapters]


def test_checkpoint_03_proves_its_story_as_the_quickstart_shows() -> None:
    """The README's quickstart command, as a learner reads it; every chapter's checks are proven above."""
    chapter = CHAPTERS["03"]
    result = course_process("checkpoint", "03")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"checkpoints/{chapter.name}/parent" in result.stdout
    assert f"course diff {chapter.nn} --target" in result.stdout
    assert "[ok]   parent shows the first red light" in result.stdout
    for lab in chapter.labs:
        assert f"[ok]   lab {lab.id} {lab.title} - {lab.expected_passed}/{lab.expected_passed} passed" in result.stdout
    total = chapter.expected_passed
    assert f"[ok]   focused tests pass on target - {total}/{total} passed" in result.stdout
    for redlight in chapter.redlights:
        assert f"[ok]   red-light {redlight.id}" in result.stdout
    assert "the story holds" in result.stdout


@pytest.mark.parametrize("nn", REBUILD)
def test_practice_starts_red_and_the_teaching_files_are_enough(nn: str, tmp_path: Path) -> None:
    """A practice dir holds the parent; with the target's teaching files it is judged as the target.

    Every chapter's first red light, and its target's every lab, are proven by
    verify (above) with the runs `course practice` and `course test` make; the
    quickstart's chapter also goes through both commands, from red to green.
    """
    chapter = CHAPTERS[nn]
    directory = tmp_path / "work"
    if nn == THROUGH_THE_CLI:
        result = course("practice", nn, str(directory))
        assert result.returncode == 0, result.stdout + result.stderr
        for fragment in chapter.first_red_light.fragments:
            assert f"seen: {fragment}" in result.stdout
        assert "This is the expected starting point." in result.stdout
    else:
        made_practice(REPO, nn, directory)
    assert (directory / "LEARNING.md").read_text().startswith(f"# Chapter {nn}: {chapter.title}")
    repo = git.Repo(directory)
    assert len(list(repo.iter_commits())) == 1
    assert not repo.is_dirty(untracked_files=True), "running the tests must not dirty the learner's repo"
    for name in chapter.focused_tests:
        assert (directory / name).read_bytes() == (chapter.parent / name).read_bytes()

    for name in chapter.teaching_files:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(chapter.target / name, directory / name)
    with verdict_copy(chapter, directory) as judged:
        assert snapshot_files(judged.directory) == snapshot_files(chapter.target)
    if nn == THROUGH_THE_CLI:
        result = course("test", nn, str(directory), "--json")
        document = json.loads(result.stdout)
        assert result.returncode == 0, result.stdout
        labs = [check for check in document["checks"] if check["kind"] == "lab"]
        assert [check["ok"] for check in labs] == [True] * len(chapter.labs)


def snapshot_files(root: Path) -> dict[str, bytes]:
    """Every file of a snapshot by its relative path, caches left out."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not set(path.relative_to(root).parts) & set(IGNORED_NAMES)
    }


@pytest.mark.parametrize("nn", OBSERVE)
def test_observe_practice_starts_from_target_with_parents_blanks(nn: str, tmp_path: Path) -> None:
    """The code is the target's, the starter files (what the learner writes) are parent's blanks;
    the target's filled-in versions make it green, and reset brings the blanks back."""
    chapter = CHAPTERS[nn]
    directory = tmp_path / "work"
    result = course("practice", nn, str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    total = chapter.expected_passed
    assert "(observe mode: the target is complete" in result.stdout
    assert "This is the expected starting point." in result.stdout
    for name in (*chapter.focused_tests, *chapter.teaching_files):
        start = chapter.parent if name in chapter.starter_files else chapter.target
        assert (directory / name).read_bytes() == (start / name).read_bytes(), name

    for name in chapter.starter_files:
        shutil.copyfile(chapter.target / name, directory / name)
    result = course("test", nn, str(directory))
    assert result.returncode == 0, result.stdout
    assert f"[ok]   all focused tests - {total}/{total} passed" in result.stdout
    assert "Green:" in result.stdout

    assert course("reset", nn, str(directory), "--yes").returncode == 0
    for name in chapter.starter_files:
        assert (directory / name).read_bytes() == (chapter.parent / name).read_bytes(), name


@pytest.mark.parametrize("nn", CHAPTERS)
def test_card_names_the_first_red_light_the_learner_sees(nn: str) -> None:
    """An observe chapter's practice dir starts from target, so its card leads with that first run
    and names the parent's collection error only as the parent's; a rebuild card leads with parent's."""
    chapter = CHAPTERS[nn]
    line = next(line for line in render_card(chapter).splitlines() if "**First red light:**" in line)
    fragments = line.index(chapter.first_red_light.fragments[0])
    if chapter.mode == "observe":
        starts = line.index("your practice dir starts from the finished target")
        assert starts < fragments and "The parent, which you never run, ends in" in line, line
        for name in chapter.starter_files:
            assert f"a blank `{name}`" in line, line
    else:
        assert "never run" not in line and line.index(chapter.first_red_light.explanation) < fragments, line


def test_prologue_names_each_prediction_right_or_wrong(tmp_path: Path) -> None:
    """Chapter 00's predictions.toml starts blank; `course test` says which are missing, wrong and right."""
    directory = tmp_path / "work"
    assert course("practice", "00", str(directory)).returncode == 0
    blank = course("test", "00", str(directory), "--tests")
    assert blank.returncode == 1
    assert "prediction turns: not written yet (in predictions.toml)" in blank.stdout
    assert blank.stdout.count("[failed] test_") == 7, blank.stdout

    predictions = directory / "predictions.toml"
    text = predictions.read_text(encoding="utf-8")
    text = text.replace('turns = ""', "turns = 3").replace('tools_start_after = ""', 'tools_start_after = "done"')
    predictions.write_text(text, encoding="utf-8")
    judged = course("test", "00", str(directory), "--lab", "0.1", "--tests")
    assert "prediction turns: you wrote 3, the run shows 2" in judged.stdout
    assert "[ok]   test_order_prediction[tools_start_after]" in judged.stdout
    assert "[failed] test_order_prediction[turns]" in judged.stdout


def test_prologue_default_test_output_names_every_prediction(tmp_path: Path) -> None:
    """Without --tests, `course test 00` gives one line per prediction (right, wrong or not written),
    points only at predictions.toml, and its Next line sends the learner to the lesson, not to code."""
    directory = tmp_path / "work"
    assert course("practice", "00", str(directory)).returncode == 0
    predictions = directory / "predictions.toml"
    text = predictions.read_text(encoding="utf-8")
    text = text.replace('turns = ""', "turns = 3").replace('tools_start_after = ""', 'tools_start_after = "done"')
    predictions.write_text(text, encoding="utf-8")

    result = course("test", "00", str(directory))
    assert result.returncode == 1
    out = result.stdout
    assert "Your predictions (predictions.toml): 1 of 7 right" in out, out
    assert "[FAIL] prediction turns: you wrote 3, the run shows 2" in out, out
    assert "[ok]   prediction tools_start_after: right" in out, out
    for key in ("second_call_roles", "readme_answers", "no_files_crashes", "no_files_is_error", "no_files_second_turn"):
        assert f"[FAIL] prediction {key}: not written yet (in predictions.toml)" in out, out
    assert "prologue.py" not in out, out
    next_line = out.splitlines()[-1]
    assert next_line.startswith("Next: lab 0.1 is not green yet"), next_line
    assert "read the lesson's fold that explains it" in next_line and "`course test 00" in next_line

    one_lab = course("test", "00", str(directory), "--lab", "0.2").stdout
    assert "Your predictions (predictions.toml): 0 of 2 right" in one_lab, one_lab
    assert "prediction turns" not in one_lab


def test_observe_failure_outside_the_predictions_points_at_predictions_only(tmp_path: Path) -> None:
    """A pinned test that fails in an observe chapter (its module edited) still gets pytest's digest,
    but the pointer names only the file the learner writes, never the finished module."""
    directory = tmp_path / "work"
    assert course("practice", "00", str(directory)).returncode == 0
    shutil.copyfile(CHAPTERS["00"].target / "predictions.toml", directory / "predictions.toml")
    module = directory / "tiny_pi" / "prologue.py"
    module.write_text(module.read_text(encoding="utf-8").replace('emit("agent_end")', 'emit("agent_over")'),
                      encoding="utf-8")
    out = course("test", "00", str(directory), "--lab", "0.1").stdout
    assert "first failure: tests/test_00_prologue.py::test_order_of_the_readme_round_trip" in out, out
    assert "the fix belongs in predictions.toml, all you write in an observe chapter" in out, out
    assert "the fix belongs in predictions.toml, tiny_pi/prologue.py" not in out, out


def test_practice_never_overwrites_and_refuses_dangerous_dirs(tmp_path: Path) -> None:
    nn = next(iter(CHAPTERS))
    directory = tmp_path / "work"
    assert course("practice", nn, str(directory)).returncode == 0
    (directory / "mine.txt").write_text("my notes")
    before = tree_hash(directory)
    again = course("practice", nn, str(directory))
    assert again.returncode == 2
    assert "already exists and is not empty" in again.stderr
    assert tree_hash(directory) == before

    a_file = tmp_path / "file"
    a_file.write_text("keep me")
    result = course("practice", nn, str(a_file))
    assert result.returncode == 2 and "is not a directory" in result.stderr
    assert a_file.read_text() == "keep me"

    inside = CHECKPOINTS / "scratch-practice"
    result = course("practice", nn, str(inside))
    assert result.returncode == 2 and "inside checkpoints/" in result.stderr
    assert not inside.exists()

    for dangerous in (str(REPO), "..", "~"):
        result = course("practice", nn, dangerous, cwd=REPO / "practice")
        assert result.returncode == 2, dangerous


@pytest.mark.parametrize("nn", CHAPTERS)
def test_lesson_code_agrees_with_the_target(nn: str) -> None:
    assert lesson_problems(CHAPTERS[nn]) == []


def test_unknown_chapter_on_the_real_course_lists_the_valid_ones(tmp_path: Path) -> None:
    for args in (("practice", "99", str(tmp_path / "x")), ("checkpoint", "abc")):
        result = course(*args)
        assert result.returncode == 2
        assert "Valid chapters: " + ", ".join(CHAPTERS[nn].name for nn in CHAPTERS) in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("nn", CHAPTERS)
def test_every_red_light_says_how_to_break_it_by_hand(nn: str) -> None:
    """The learner breaks the code by hand (no patch of the target's fits a learner's lines), so each
    red light says, in chapter.toml's by_hand, what to change in the learner's own code and what to
    run then; `course redlight` prints exactly that before it watches."""
    chapter = CHAPTERS[nn]
    for redlight in chapter.redlights:
        assert redlight.by_hand.strip(), f"{redlight.id} has no by_hand instruction"
        assert redlight.by_hand.endswith(f"course test {nn}.") or f"course test {nn} (" in redlight.by_hand, redlight.id
        assert redlight.by_hand.count(". ") <= 1, f"{redlight.id}: one or two sentences"
