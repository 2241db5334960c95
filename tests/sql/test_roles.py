"""Roles: ragsql_reader reads metrics, diagnostics and comparisons but no raw text; ragsql_writer loads,
retrieves, generates and judges through the CLI but changes no schema."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragsql.cli import main
from tests.conftest import CITUS_SUITE, DEMO, judged_demo

RUN = "demo-bm25"


def _login(owner_url: str, group: str | None) -> str:
    """A new login role in `group` (or in none) and the URL that connects as it."""
    name = f"ragsql_t_{(group or 'none').removeprefix('ragsql_')}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(owner_url, autocommit=True) as admin:
        admin.execute(f'create role "{name}" login password \'x\'' + (f" in role {group}" if group else ""))
    params = conninfo_to_dict(owner_url)
    params.update(user=name, password="x")
    return make_conninfo(**params)


def _drop_login(owner_url: str, url: str) -> None:
    name = conninfo_to_dict(url)["user"]
    with psycopg.connect(owner_url, autocommit=True) as admin:
        admin.execute(f'drop owned by "{name}"')
        admin.execute(f'drop role "{name}"')


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    """A database with the demo pipeline run by the owner (corpus, eval set, three runs, answers, verdicts)."""
    with judged_demo(server_url, 6) as url:
        yield url


@contextlib.contextmanager
def _member(owner_url: str, group: str | None) -> Iterator[str]:
    url = _login(owner_url, group)
    try:
        yield url
    finally:
        _drop_login(owner_url, url)


@pytest.fixture
def reader(demo_url):
    with _member(demo_url, "ragsql_reader") as url:
        yield url


@pytest.fixture
def writer(demo_url):
    with _member(demo_url, "ragsql_writer") as url:
        yield url


def _rows(url: str, query: str, params=()) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def test_reader_gets_every_metric_diagnosis_and_comparison_the_owner_gets(demo_url, reader):
    """Through ragsql_report, a reader sees the same run_measure, measure(), run_generation, query_generation,
    diagnose_run and diagnose_queries rows as the owner through ragsql; also by the same names on its search_path."""
    same = [
        ("select * from {}.run_measure where run = %s order by measure", (RUN,)),
        ("select * from {}.query_measure where run = %s order by qid, measure", (RUN,)),
        ("select * from {}.measure(%s, 'nDCG@10') order by qid", (RUN,)),
        ("select * from {}.run_generation order by run, metric", ()),
        ("select * from {}.query_generation where run = %s order by metric, qid", (RUN,)),
        ("select * from {}.diagnose_run(%s)", (RUN,)),
        ("select * from {}.diagnose_queries(%s) order by qid", (RUN,)),
        ("select * from {}.faithfulness(%s) order by qid", (RUN,)),
    ]
    for query, params in same:
        owner = _rows(demo_url, query.format("ragsql"), params)
        assert owner, query
        assert _rows(reader, query.format("ragsql_report"), params) == owner, query
    with psycopg.connect(reader) as conn:
        conn.execute("set search_path = ragsql_report, ragsql")
        assert conn.execute("select count(*) from run_measure where run = %s", (RUN,)).fetchone()[0] > 10
        # tables and columns without raw text, and the usage view, are readable as they are
        assert conn.execute("select count(*) from judge_usage").fetchone()[0] > 0
        assert conn.execute("select count(*) from ragsql.judge_call where status = 'ok'").fetchone()[0] > 0
        assert conn.execute("select count(*) from ragsql.statement_verdict where verdict = 'supported'").fetchone()[0]
        assert conn.execute("select count(*) from ragsql.query where text is not null").fetchone()[0] > 0


@pytest.mark.parametrize("query", [
    "select response from ragsql.judge_call",
    "select * from ragsql.judge_call",
    "select text from ragsql.answer",
    "select text from ragsql.chunk",
    "select text from ragsql.document",
    "select text from ragsql.run_result",
    "select text from ragsql.answer_context",
    "select text from ragsql.reference_answer",
    "select statement from ragsql.text_statement",
    "select reason from ragsql.statement_verdict",
    "select question from ragsql.generated_question",
    "select term from ragsql.chunk_term",
    "select * from ragsql.correctness_verdict",
    # the inlined metric functions read answer text with the caller's rights: readers use ragsql_report
    f"select * from ragsql.evaluate_generation('{RUN}')",
    "insert into ragsql.dataset (name) values ('r')",
    "update ragsql.run set notes = 'x'",
    "delete from ragsql.judge_task",
    "create table ragsql.mine (id int)",
])
def test_reader_reads_no_raw_text_and_writes_nothing(reader, query):
    """Raw judge replies, documents, chunks, retrieved text, answers, contexts, references, statements and
    judge reasons are refused to a reader, as are writes and DDL."""
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(query)


def _cli(url: str, monkeypatch, *args: str) -> int:
    monkeypatch.setenv("RAGSQL_DATABASE_URL", url)
    return main(list(args))


def test_writer_imports_retrieves_generates_and_judges_through_the_cli(demo_url, writer, monkeypatch):
    """As a ragsql_writer login: import an eval set, retrieve a bm25 run from the owner's corpus, generate and
    judge it offline; the owner then sees the run's metrics."""
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert _cli(writer, monkeypatch, "import", "jsonl", str(DEMO / "evalset.jsonl"), "--dataset", "w") == 0
    assert _cli(writer, monkeypatch, "retrieve", "--dataset", "w", "--corpus", "demo", "--run", "w-bm25",
                "--mode", "bm25") == 0
    assert _cli(writer, monkeypatch, "generate", "--run", "w-bm25", "--offline") == 0
    assert _cli(writer, monkeypatch, "judge", "--run", "w-bm25", "--offline") == 0
    assert _cli(writer, monkeypatch, "metrics", "--run", "w-bm25") == 0
    values = dict(_rows(demo_url, "select metric, value from ragsql.run_generation where run = 'w-bm25'"))
    assert values["faithfulness"] is not None
    assert _rows(demo_url, "select count(*) from ragsql.run_measure where run = 'w-bm25' and value > 0")[0][0] > 5


def test_writer_ingests_a_corpus(demo_url, writer, monkeypatch, tmp_path):
    """A writer ingests documents into a new corpus and searches it: the BM25 refresh's partition DDL, and the
    postings table the first ingest of a version loads and attaches, run as the owner (security definer);
    deleting the version drops its partitions likewise."""
    (tmp_path / "a.txt").write_text("PostgreSQL stores the evaluation next to the data.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("The judge replies are cached by request hash.\n", encoding="utf-8")
    assert _cli(writer, monkeypatch, "ingest", str(tmp_path), "--corpus", "wc") == 0
    with psycopg.connect(writer) as conn:
        version = conn.execute("select cv.id from ragsql.corpus_version as cv join ragsql.corpus as c "
                               "on c.id = cv.corpus_id where c.name = 'wc'").fetchone()[0]
        assert conn.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
        assert conn.execute("select count(*) from ragsql.bm25(%s, array['judg'], 5)", (version,)).fetchone()[0] >= 0
        assert conn.execute("select count(*) from ragsql.fuzzy_search(%s, 'judge replies', 5)",
                            (version,)).fetchone()[0] == 1
        conn.execute("delete from ragsql.corpus where name = 'wc'")
        conn.commit()
        assert conn.execute("select to_regclass(%s)", (f"ragsql.bm25_list_v{version}",)).fetchone()[0] is None
        assert conn.execute("select to_regclass(%s)", (f"ragsql.chunk_term_v{version}",)).fetchone()[0] is None


@pytest.mark.parametrize("statement", [
    "create table ragsql.mine (id int)",
    "alter table ragsql.run add column mine int",
    "drop table ragsql.judge_call",
    "create or replace function ragsql.measure(run text, measure text, rel_level integer default 1) "
    "returns table (qid text, value float8) language sql as 'select null::text, 0::float8'",
    "create index on ragsql.chunk (length)",
    "truncate ragsql.judge_call",
    "delete from ragsql.schema_migration",
    "update ragsql.schema_install set version = 'x'",
])
def test_writer_changes_no_schema(writer, statement):
    """A writer may not create, alter, drop or truncate tables, replace functions, add indexes or edit the
    install ledger."""
    with psycopg.connect(writer) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement)


def test_a_writer_on_an_outdated_database_is_told_to_ask_the_owner(demo_url, writer, monkeypatch, capsys):
    """When the database records another fingerprint, a writer's command cannot upgrade it and says who can."""
    with psycopg.connect(demo_url, autocommit=True) as owner:
        kept = owner.execute("select fingerprint from ragsql.schema_install").fetchone()[0]
        owner.execute("update ragsql.schema_install set fingerprint = repeat('0', 64)")
    try:
        assert _cli(writer, monkeypatch, "metrics", "--run", RUN) == 1
        err = capsys.readouterr().err
        assert "ragsql db init" in err and "owner" in err and "Traceback" not in err
    finally:
        with psycopg.connect(demo_url, autocommit=True) as owner:
            owner.execute("update ragsql.schema_install set fingerprint = %s", (kept,))


def test_a_login_in_neither_role_is_told_which_to_get(demo_url, monkeypatch, capsys):
    """A user who is in neither role gets one error line naming the roles, not a permission traceback."""
    with _member(demo_url, None) as url:
        assert _cli(url, monkeypatch, "metrics", "--run", RUN) == 1
    err = capsys.readouterr().err
    assert "ragsql_writer" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(CITUS_SUITE, reason="one server's layout: Citus keeps run_result whole")
def test_writer_imports_a_trec_run_into_a_partition_and_deletes_it(demo_url, writer, reader, monkeypatch, tmp_path):
    """A ragsql_writer login imports a TREC run: its partition of run_result is made, indexed and attached by the
    owner's functions (security definer) and keeps no grant to the login; a reader reads its measures through
    ragsql_report but not the partition itself; the writer's `delete run` drops the partition."""
    qrels, run = tmp_path / "q.qrels", tmp_path / "r.run"
    qrels.write_text("1 0 D1 1\n2 0 D9 1\n", encoding="utf-8")
    run.write_text("".join(f"{q} Q0 D{d} {d} {10 - d} w\n" for q in (1, 2) for d in range(1, 6)), encoding="utf-8")
    assert _cli(writer, monkeypatch, "import", "trec", "--dataset", "wt", "--qrels", str(qrels), "--file", str(run),
                "--run", "w-trec") == 0
    run_id = _rows(demo_url, "select id from ragsql.run where name = 'w-trec'")[0][0]
    part = f"ragsql.run_result_r{run_id}"
    login = conninfo_to_dict(writer)["user"]
    acl = _rows(demo_url, "select coalesce(relacl::text, '') from pg_class as c join pg_inherits as i "
                          "on i.inhrelid = c.oid where c.oid = %s::regclass", (part,))
    assert acl and login not in acl[0][0]
    assert _rows(reader, "select value from ragsql_report.run_measure where run = 'w-trec' and measure = 'P@5'") \
        == [(0.1,)]
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"select docno from {part}")
    assert _cli(writer, monkeypatch, "delete", "run", "w-trec", "--yes") == 0
    assert _rows(demo_url, "select to_regclass(%s)", (part,)) == [(None,)]
