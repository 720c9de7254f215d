"""Durable storage: a change is a batch that SQLite takes whole, or not at all.

A durable run keeps two collections of JSON records, `entries` (the
conversation, written once) and `tasks` (work to do, replaced as it moves
on), in one SQLite file. Every change is a batch of writes, each replacing
one record by its id:

- the whole batch is checked before anything is written: one value JSON
  cannot hold refuses the batch (StorageRejected), and nothing of it is kept;
- a batch that passes is one SQLite transaction that also takes the next
  sequence number, so a refused or interrupted batch leaves no record and
  no number behind;
- the file is in WAL mode with synchronous=FULL: when `commit` returns, the
  batch survives the process, even a SIGKILL.

`DurableSession` puts one mutation line in front of the store: commits run
one after another, each change reads what the last one committed, and its
writes become visible (the session's view) only once the store has them.
The store works in a thread, so the rest of the run goes on meanwhile;
nothing but reading and writing records happens inside a commit.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import trio
from attrs import frozen

COLLECTIONS = ("entries", "tasks")
STORE_VERSION = 19  # PRAGMA user_version of a durable store: a SQLite file of anything else is refused
KILL_VARIABLE = "TINY_PI_KILL_AT_COMMIT"
SCHEMA = (
    "CREATE TABLE records (collection TEXT NOT NULL, id TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (collection, id))",
    "CREATE TABLE commits (seq INTEGER PRIMARY KEY, writes INTEGER NOT NULL)",
)
UPSERT = (  # an update keeps the record's rowid, and so its place in the order records are read
    "INSERT INTO records (collection, id, value) VALUES (?, ?, ?)"
    " ON CONFLICT (collection, id) DO UPDATE SET value = excluded.value"
)
NOT_A_STORE = "{path}: not a tiny_pi durable store ({why})"

T = TypeVar("T")


class StoreError(Exception):
    """The file cannot be a durable store: a directory, not SQLite, another program's database."""


class StorageRejected(ValueError):
    """The batch was refused before anything was written: the store is as it was."""


@frozen
class Write:
    """One write of a batch: the record `id` of `collection` becomes `value` (a JSON value)."""

    collection: str
    id: str
    value: Any


def encode(write: Write) -> str:
    """The value as the store keeps it, once the write is known to be valid; StorageRejected otherwise."""
    if write.collection not in COLLECTIONS:
        raise StorageRejected(f"unknown collection {write.collection!r}: a store has {', '.join(COLLECTIONS)}")
    if not isinstance(write.id, str) or not write.id:
        raise StorageRejected(f"a record id is a non-empty string, got {write.id!r}")
    try:
        document = json.dumps(write.value, ensure_ascii=False, allow_nan=False)
        document.encode("utf-8")  # a lone surrogate is no text SQLite can keep
    except (TypeError, ValueError) as error:
        raise StorageRejected(f"{write.collection}/{write.id} is not a JSON value: {error}") from None
    return document


class SqliteStore:
    """The records of one durable run in one SQLite file; `commit` is its only way to change them."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.connection = connection
        self.commits_made = 0  # by this process: what KILL_VARIABLE counts

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> SqliteStore:
        """Open the store at `path` (a new one if there is no file and `create`); StoreError if it cannot be one."""
        path = Path(path)
        exists = regular_file(path)
        if not exists and not create:
            raise StoreError(f"{path}: no such file")
        try:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as error:
            raise StoreError(NOT_A_STORE.format(path=path, why=error)) from None
        try:
            prepare(connection)
        except sqlite3.Error as error:
            connection.close()
            raise StoreError(NOT_A_STORE.format(path=path, why=error)) from None
        except StoreError as error:
            connection.close()
            raise StoreError(NOT_A_STORE.format(path=path, why=error)) from None
        return cls(path, connection)

    @property
    def seq(self) -> int:
        """The sequence number of the last commit (0 before the first)."""
        row = self.connection.execute("SELECT max(seq) FROM commits").fetchone()
        return row[0] or 0

    def read(self) -> dict[str, dict[str, Any]]:
        """Every record, by collection and id, in the order each was first written."""
        records: dict[str, dict[str, Any]] = {collection: {} for collection in COLLECTIONS}
        for collection, record_id, value in self.connection.execute(
            "SELECT collection, id, value FROM records ORDER BY rowid"
        ):
            records[collection][record_id] = json.loads(value)
        return records

    def commit(self, writes: Sequence[Write]) -> int:
        """Check the whole batch, then write it in one transaction; returns its sequence number."""
        documents = [encode(write) for write in writes]  # a refused batch stops here: nothing written
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            for write, document in zip(writes, documents):
                self.connection.execute(UPSERT, (write.collection, write.id, document))
            cursor = self.connection.execute("INSERT INTO commits (writes) VALUES (?)", (len(writes),))
            self.commits_made += 1
            kill_point(self.commits_made)
            self.connection.execute("COMMIT")
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        return cursor.lastrowid

    def close(self) -> None:
        """Close the file; every commit is already on disk."""
        self.connection.close()


def regular_file(path: Path) -> bool:
    """True for a regular file, False for no file; anything else (a directory, a pipe) is a StoreError.

    SQLite would wait on a named pipe, and says only "unable to open" for a directory.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as error:
        raise StoreError(f"{path}: {error.strerror}") from None
    if stat.S_ISDIR(mode):
        raise StoreError(f"{path}: a directory, not a durable store")
    if not stat.S_ISREG(mode):
        raise StoreError(f"{path}: not a regular file, so not a durable store")
    return True


def prepare(connection: sqlite3.Connection) -> None:
    """WAL and full syncs; the tables of a new store, or a check that the file is one."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]  # a file that is not SQLite fails here
    if version != STORE_VERSION:
        tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if version != 0 or tables:
            raise StoreError(f"user_version {version}, {tables} tables: another program's database")
        connection.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {STORE_VERSION}")
        connection.execute("COMMIT")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")


def kill_point(commits_made: int) -> None:
    """The crash tests' hook: at commit number $TINY_PI_KILL_AT_COMMIT of this process, SIGKILL it.

    Called with the batch written and its transaction not yet committed: the
    process dies the hardest way there is, and SQLite must forget that batch.
    """
    wanted = os.environ.get(KILL_VARIABLE)
    if wanted is not None and wanted.strip() == str(commits_made):
        os.kill(os.getpid(), signal.SIGKILL)


class Transaction:
    """What a change sees: the committed records, then this batch's own writes; `put` only collects."""

    def __init__(self, view: dict[str, dict[str, Any]]) -> None:
        self.view = view
        self.writes: dict[tuple[str, str], Any] = {}

    def get(self, collection: str, record_id: str) -> Any:
        """The record as this batch would leave it, or None."""
        if (collection, record_id) in self.writes:
            return self.writes[(collection, record_id)]
        return self.view[collection].get(record_id)

    def list(self, collection: str) -> list[Any]:
        """Every record of `collection` as this batch would leave it, in the order each was first written."""
        records = dict(self.view[collection])
        for (where, record_id), value in self.writes.items():
            if where == collection:
                records[record_id] = value
        return list(records.values())

    def put(self, collection: str, record_id: str, value: Any) -> None:
        """Replace the record `record_id` of `collection` with `value` when the batch commits."""
        self.writes[(collection, record_id)] = value

    def batch(self) -> list[Write]:
        """The writes, in the order they were first put."""
        return [Write(collection, record_id, value) for (collection, record_id), value in self.writes.items()]


class DurableSession:
    """The one mutation line in front of a store, and the view of what it has committed."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.view = store.read()
        self.line = trio.Lock()  # fair: commits run in the order they were asked for
        self.on_commit: Callable[[int, list[Write]], None] = lambda seq, writes: None

    def get(self, collection: str, record_id: str) -> Any:
        """A committed record, or None."""
        return self.view[collection].get(record_id)

    def list(self, collection: str) -> list[Any]:
        """The committed records of `collection`, in the order each was first written."""
        return list(self.view[collection].values())

    async def commit(self, change: Callable[[Transaction], T]) -> T:
        """Run `change` on the committed state, store its writes, then make them visible; returns its result.

        A change that raises, or a batch the store refuses, changes nothing
        anybody can see. A change with no writes makes no commit.
        """
        async with self.line:
            tx = Transaction(self.view)
            result = change(tx)
            batch = tx.batch()
            if not batch:
                return result
            seq = await trio.to_thread.run_sync(self.store.commit, batch)
            for write in batch:  # stored: now, and only now, visible
                self.view[write.collection][write.id] = json.loads(encode(write))
            self.on_commit(seq, batch)
            return result
