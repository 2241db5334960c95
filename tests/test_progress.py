"""Progress a person can read on every long step (issue 28): ingest gives its total of documents before the
first chunk is embedded and moves every few chunks, not once at the end of a batch (the demo showed `0/?` for 73 s);
on a terminal the bar shows count, unit and time left; off one (a pipe) nothing at all."""

from __future__ import annotations

import os
import pty
import re
import sys

import psycopg

from ragsql.ingest import ingest
from tests.conftest import DEMO, ENDPOINT_VARS

DOCUMENTS = sum(1 for line in (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())


def test_ingest_reports_its_total_first_then_every_step_of_chunks(fresh_db):
    calls: list[tuple] = []
    with psycopg.connect(fresh_db) as conn:
        summary = ingest(
            conn,
            DEMO / "corpus.jsonl",
            "demo",
            embedder="offline",
            chunk_size=200,
            overlap=0,
            on_progress=lambda *args: calls.append(args),
        )
    assert summary.added == DOCUMENTS and summary.chunks > 64
    assert calls[0] == (0, DOCUMENTS, "")  # the total, before any chunk is embedded
    assert calls[-1] == (DOCUMENTS, DOCUMENTS, f"{summary.chunks} chunks")
    steps = calls[1:-1]
    # every 64 chunks embedded, within the one batch the demo's documents make, a part done counting as its share
    assert [note for _, _, note in steps] == [f"{n} chunks" for n in [*range(64, summary.chunks, 64), summary.chunks]]
    assert all(0 < done < DOCUMENTS for done, _, _ in steps[:-1])
    done = [c[0] for c in calls]
    assert done == sorted(done)


def _ragsql(url: str, *args: str, terminal: bool) -> tuple[int, str]:
    """`python -m ragsql ARGS`: exit code and what it wrote on stderr (on the terminal, stdout too)."""
    env = {k: v for k, v in os.environ.items() if k not in ENDPOINT_VARS}
    env |= {"RAGSQL_DATABASE_URL": url, "TERM": "xterm", "COLUMNS": "200"}
    argv = [sys.executable, "-m", "ragsql", *args]
    if not terminal:
        import subprocess

        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stderr
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the pseudo-terminal
        os.execve(sys.executable, argv, env)
    out = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", errors="replace")


def test_a_terminal_shows_the_bar_with_its_total_and_a_pipe_shows_none(fresh_db):
    corpus = str(DEMO / "corpus.jsonl")
    code, shown = _ragsql(
        fresh_db, "ingest", corpus, "--corpus", "tty", "--chunk-size", "200", "--overlap", "0", terminal=True
    )
    assert code == 0, shown[-2000:]
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # colours and cursor moves
    assert re.search(rf"\b{DOCUMENTS}/{DOCUMENTS} documents .* chunks", shown), shown[-2000:]
    assert f"/{DOCUMENTS} documents" in shown and "ingesting tty" in shown and "left" in shown
    code, err = _ragsql(
        fresh_db, "ingest", corpus, "--corpus", "pipe", "--chunk-size", "200", "--overlap", "0", terminal=False
    )
    assert code == 0, err
    assert "ingesting pipe" not in err and "documents" not in err and "\x1b[" not in err
