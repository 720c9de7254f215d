"""course.dev.merging, the engine of `course dev carry`: git's three-way merge of files and of red-light
patches, checked in-process on small texts."""

from __future__ import annotations

from course.dev.merging import Merge, merge_text, patched, rebase_patch, unified_patch

BASE = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\n"


def test_changes_far_apart_merge_and_overlapping_ones_conflict() -> None:
    mine = BASE.replace(b"one", b"ONE")
    incoming = BASE.replace(b"seven", b"SEVEN")
    merged = merge_text(BASE, mine, incoming, ("later", "carried"))
    assert merged == Merge(b"ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n", True)

    clash = merge_text(BASE, mine, BASE.replace(b"one", b"uno"), ("later", "carried"))
    assert not clash.clean
    assert clash.conflict_regions().splitlines() == [
        "    <<<<<<< later", "    ONE", "    =======", "    uno", "    >>>>>>> carried",
    ]


def test_a_patch_that_still_applies_is_kept_byte_for_byte() -> None:
    long = BASE + b"eight\nnine\nten\n"
    old = {"m.py": long}
    patch = unified_patch(old, {"m.py": long.replace(b"six", b"SIX")})
    new = {"m.py": b"zero\n" + long}  # moved by one line: git apply finds it at an offset
    assert rebase_patch(patch, old, new, ("patch", "target")) == patch


def test_a_patch_whose_context_changed_is_rewritten_to_apply() -> None:
    old = {"m.py": BASE}
    broken = BASE.replace(b"four", b"FOUR")
    patch = unified_patch(old, {"m.py": broken})
    new = {"m.py": BASE.replace(b"two", b"TWO")}
    rewritten = rebase_patch(patch, old, new, ("patch", "target"))
    assert isinstance(rewritten, bytes) and rewritten != patch
    assert patched(new, rewritten) == {"m.py": broken.replace(b"two", b"TWO")}


def test_a_patch_on_the_carried_lines_conflicts_and_a_broken_one_is_left_alone() -> None:
    old = {"m.py": BASE}
    patch = unified_patch(old, {"m.py": BASE.replace(b"four", b"FOUR")})
    result = rebase_patch(patch, old, {"m.py": BASE.replace(b"four", b"4")}, ("patch", "target"))
    assert isinstance(result, Merge) and not result.clean
    assert rebase_patch(b"not a patch\n", old, {"m.py": b"x\n"}, ("patch", "target")) is None


def test_a_file_without_a_final_newline_still_makes_a_valid_patch() -> None:
    old = {"m.py": b"a\nb"}
    new = {"m.py": b"a\nc"}
    patch = unified_patch(old, new)
    assert b"\\ No newline at end of file" in patch
    assert patched(old, patch) == new
