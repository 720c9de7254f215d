"""The seed of a capstone run, and the Draw every case is made from.

A run draws a fresh seed, so no two runs ask the same questions: file
names, paths, call ids, tool names, sizes and secrets all come from it.
Each family draws from its own stream, `Random("SEED/FAMILY")`, so a
family added later does not change what the others draw, and the same
seed draws the same cases (the author's `--seed`, for reproducing a run).
"""

from __future__ import annotations

import random
import secrets
import string
from typing import Sequence, TypeVar

T = TypeVar("T")

LETTERS = string.ascii_lowercase
ALPHANUMERIC = string.ascii_letters + string.digits
EXTENSIONS = (".txt", ".md", ".py", ".json", ".cfg", "")
CALL_ID_PREFIXES = ("call_", "toolu_", "fc-", "c.", "")


def fresh_seed() -> int:
    """A seed nobody chose: the operating system's randomness."""
    return secrets.randbits(63)


class Draw:
    """Random case material for one family of one run."""

    def __init__(self, seed: int, family: str) -> None:
        self.random = random.Random(f"{seed}/{family}")

    def integer(self, low: int, high: int) -> int:
        """A whole number from `low` to `high`, both included."""
        return self.random.randint(low, high)

    def choice(self, options: Sequence[T]) -> T:
        return self.random.choice(options)

    def sample(self, options: Sequence[T], count: int) -> list[T]:
        return self.random.sample(list(options), count)

    def shuffled(self, items: Sequence[T]) -> list[T]:
        items = list(items)
        self.random.shuffle(items)
        return items

    def chance(self, probability: float) -> bool:
        return self.random.random() < probability

    def word(self, low: int = 4, high: int = 9) -> str:
        """A lowercase word that means nothing."""
        return "".join(self.random.choice(LETTERS) for _ in range(self.integer(low, high)))

    def words(self, count: int) -> str:
        return " ".join(self.word() for _ in range(count))

    def token(self) -> str:
        """A secret no program could guess and no text holds by chance: it marks what must (not) arrive."""
        return "Q" + "".join(self.random.choice(ALPHANUMERIC) for _ in range(19))

    def file_name(self) -> str:
        """A file name with a separator and an extension that vary: `kelp-vorn.md`, `abed_ti`."""
        return f"{self.word()}{self.choice('-_.')}{self.word(2, 6)}{self.choice(EXTENSIONS)}"

    def names(self, count: int) -> list[str]:
        """`count` different file names."""
        found: list[str] = []
        while len(found) < count:
            name = self.file_name()
            if name not in found:
                found.append(name)
        return found

    def model_name(self) -> str:
        """A model's name as a server might list one: `velkor-3`, `amsit-2.5-mini`."""
        version = self.choice((f"{self.integer(1, 9)}", f"{self.integer(1, 4)}.{self.integer(0, 9)}"))
        return f"{self.word(4, 7)}-{version}{self.choice(('', '-mini', '-instruct', '-chat', '-large'))}"

    def call_id(self) -> str:
        """A tool call id as some provider might spell it."""
        tail = "".join(self.random.choice(ALPHANUMERIC) for _ in range(self.integer(6, 30)))
        return self.choice(CALL_ID_PREFIXES) + tail

    def call_ids(self, count: int) -> list[str]:
        found: list[str] = []
        while len(found) < count:
            candidate = self.call_id()
            if candidate not in found:
                found.append(candidate)
        return found
