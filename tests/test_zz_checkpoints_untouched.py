"""Runs last (by name): after every command above, checkpoints/ is byte-for-byte unchanged."""

from conftest import CHECKPOINTS, tree_hash


def test_no_command_wrote_under_checkpoints(checkpoints_hash_at_start: str) -> None:
    assert tree_hash(CHECKPOINTS) == checkpoints_hash_at_start
