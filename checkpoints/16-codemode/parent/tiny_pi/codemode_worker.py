"""The codemode worker: one QuickJS interpreter, one script, in a process of its own.

    python tiny_pi/codemode_worker.py     # started by tiny_pi.codemode, never by hand

The host (tiny_pi.codemode) starts a fresh worker for every script and talks
to it in JSON lines: one JSON object per line, stdin from the host, stdout
to the host. The first line is the `start` message; after it the worker
sends `output`, `call` and, last, one `done`; the host answers each `call`
with a `result`. Values cross the pipe as JSON text, so what a script
returns is what `JSON.stringify` made of it, parsed again on the host side.

The worker never imports tiny_pi: it is started by its file's path, so it
works from any directory, and it knows nothing of the tools but their names.
A script that runs away is the host's to end: it kills this process.
"""

from __future__ import annotations

import difflib
import json
import sys
from typing import Any, TextIO

import quickjs

NEVER_SETTLES = "the script can never settle: no tool call is pending"

# The script's world: `tools` (a Proxy over the names the host sent) and
# `console`. Each call becomes a Promise whose settle functions wait in
# __pending until the host's result arrives.
PRELUDE = r"""
globalThis.__state = null;
globalThis.__pending = new Map();
globalThis.__settle = (id, ok, payload) => {
  const waiting = __pending.get(id);
  if (waiting === undefined) return;
  __pending.delete(id);
  if (ok) waiting.resolve(payload === null ? undefined : JSON.parse(payload));
  else waiting.reject(new Error(payload));
};
const __names = JSON.parse(__tool_names);
const tools = new Proxy({}, {
  get(target, name) {
    if (typeof name !== "string" || name === "then") return undefined;
    if (!__names.includes(name)) throw new TypeError(__missing(name));
    return (args) => new Promise((resolve, reject) => {
      const json = JSON.stringify(args === undefined ? {} : args);
      __pending.set(__call(name, json === undefined ? "null" : json), { resolve, reject });
    });
  },
});
const __words = (parts) => parts.map((part) => {
  if (typeof part === "string") return part;
  const json = JSON.stringify(part);
  return json === undefined ? String(part) : json;
}).join(" ");
const console = {
  log: (...parts) => __output(__words(parts)),
  info: (...parts) => __output(__words(parts)),
  warn: (...parts) => __output(__words(parts)),
  error: (...parts) => __output(__words(parts)),
};
const __AsyncFunction = (async function () {}).constructor;
(async () => {
  const body = new __AsyncFunction("tools", "console", __code);
  return await body(tools, console);
})().then(
  (value) => {
    const json = JSON.stringify(value);
    __state = JSON.stringify({ ok: true, value: json === undefined ? null : json });
  },
  (error) => {
    const failed = error instanceof Error
      ? { name: error.name, message: error.message, stack: error.stack }
      : { name: "Error", message: String(error) };
    __state = JSON.stringify({ ok: false, error: failed });
  },
);
"""


class Worker:
    """The interpreter, the calls it has sent, and the pipe to the host."""

    def __init__(self, start: dict[str, Any], out: TextIO) -> None:
        self.out = out
        self.names: list[str] = list(start["tools"])
        self.calls = 0  # calls sent so far: the next one's id is calls + 1
        self.pending = 0  # calls sent whose result has not come back
        self.context = quickjs.Context()
        self.context.set_memory_limit(int(start["memory_limit"]))
        self.context.set("__code", start["code"])
        self.context.set("__tool_names", json.dumps(self.names))
        self.context.add_callable("__call", self.call)
        self.context.add_callable("__missing", self.missing)
        self.context.add_callable("__output", self.output)

    def send(self, message: dict[str, Any]) -> None:
        """One JSON line to the host, flushed at once: the host waits for it."""
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def call(self, name: str, arguments: str) -> int:
        """The script called tools.NAME: tell the host, return the call's id."""
        raise NotImplementedError("lab 16.1: call")

    def missing(self, name: str) -> str:
        """The TypeError's message for a tool that is not there, with the names closest to it."""
        raise NotImplementedError("lab 16.3: missing")

    def output(self, line: str) -> None:
        """console.log and its kin: one `output` line to the host."""
        raise NotImplementedError("lab 16.1: output")

    def run(self, lines: TextIO) -> int:
        """Run the script to its end: settle each call as its result arrives."""
        raise NotImplementedError("lab 16.1: run")

    def fail(self, name: str, message: str) -> int:
        self.send({"type": "done", "ok": False, "error": {"name": name, "message": message}})
        return 0


def main() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but protocol lines may reach the host's pipe
    start = json.loads(sys.stdin.readline())
    return Worker(start, out).run(sys.stdin)


if __name__ == "__main__":
    raise SystemExit(main())
