"""The faster ingest (issue 15, migration 0150: postings per corpus version loaded unindexed and attached, a
trigram index per version, binary COPY of embeddings) stores the rows the ingest before it stored and retrieves
the same results; a database filled before it is upgraded in place and keeps retrieving the same."""

from __future__ import annotations

import json
import random
from pathlib import Path

import psycopg
import pytest

from tests.sql.test_upgrade import ROOT, _database, _drop, _psql_install, _ragsql, _release

BEFORE = "4bf92cf"  # main before issue 15's ingest
DEMO = ROOT / "ragsql" / "data" / "demo" / "corpus.jsonl"
EVALSET = ROOT / "ragsql" / "data" / "demo" / "evalset.jsonl"

# every stored row of the corpus tables, named by document and position rather than by generated ids
STORED = {
    "chunk": """select d.doc_id, c.position, c.start_char, c.end_char, c.text, c.length, c.embedding::text, v.splitter
                from ragsql.chunk as c join ragsql.document as d on d.id = c.document_id
                join ragsql.corpus_version as v on v.id = c.version_id order by 8, 1, 2""",
    "posting": """select v.splitter, d.doc_id, c.position, t.term, t.tf, t.length
                  from ragsql.chunk_term as t join ragsql.chunk as c on c.id = t.chunk_id
                  join ragsql.document as d on d.id = c.document_id
                  join ragsql.corpus_version as v on v.id = t.version_id order by 1, 2, 3, 4""",
    "bm25_term": """select v.splitter, t.term, t.df, t.idf, t.ub from ragsql.bm25_term as t
                    join ragsql.corpus_version as v on v.id = t.version_id order by 1, 2""",
    "version": """select splitter, chunk_size, overlap, embedder, dimensions, bm25_chunks, bm25_avgdl, bm25_fresh,
                         bm25_lists from ragsql.corpus_version order by 1""",
}


def _english(path: Path, documents: int = 40, seed: int = 15) -> Path:
    """A JSONL file of English-like documents (a Zipfian vocabulary with stop words; about 10 chunks each)."""
    rng = random.Random(seed)
    words = ["the", "of", "and", "retrieval", "ranking", "indexes", "chunk", "postgres"] + [
        "".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    with path.open("w", encoding="utf-8") as out:
        for d in range(documents):
            text = "\n\n".join(
                " ".join(rng.choices(words, weights, k=rng.randint(40, 90))).capitalize() + "."
                for _ in range(8))
            out.write(json.dumps({"id": f"en-{d}", "text": text, "lang": "en"}) + "\n")
    return path


def _ingest(tree: Path, url: str, *paths: Path, splitter: str = "recursive") -> None:
    done = _ragsql(tree, url, "ingest", *map(str, paths), "--corpus", "c", "--splitter", splitter,
                   "--embedder", "offline")
    assert done.returncode == 0, done.stderr


def stored(url: str) -> dict[str, list]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(query).fetchall() for name, query in STORED.items()}


def retrieved(url: str) -> dict[tuple, list]:
    """Top 10 of ragsql.bm25, vector_search (exact: index scans off, since two builds of an HNSW graph differ),
    fuzzy_search and hybrid_search for every demo question, on every version, by document and position."""
    questions = [(r["query"], r["language"]) for r in map(json.loads, EVALSET.read_text("utf-8").splitlines())]
    out: dict[tuple, list] = {}
    with psycopg.connect(url) as conn:
        from ragsql.corpus import SEGMENTERS
        from ragsql.db.corpus import query_terms

        terms = [sorted(t) for t in query_terms(conn, questions, SEGMENTERS)]
        for version, splitter in conn.execute("select id, splitter from ragsql.corpus_version order by id"):
            for i, (text, _) in enumerate(questions):
                embedding = conn.execute("select embedding from ragsql.chunk where version_id = %s "
                                         "order by md5(text) limit 1 offset %s", (version, i)).fetchone()[0]
                for kind, call, args in (
                        ("bm25", "ragsql.bm25(%s, %s, 10)", (version, terms[i])),
                        ("vector", "ragsql.vector_search(%s, %s::vector, 10)", (version, embedding)),
                        ("fuzzy", "ragsql.fuzzy_search(%s, %s, 10)", (version, text)),
                        ("hybrid", "ragsql.hybrid_search(%s, %s, %s, %s::vector, 10)",
                         (version, text, terms[i], embedding))):
                    conn.execute("set enable_indexscan = " + ("on" if kind in ("bm25", "fuzzy") else "off"))
                    # hybrid's RRF sum is taken in path order since issue 26 (in plan order before): equal to 1e-12
                    score = "round(h.score::numeric, 12)::float8" if kind == "hybrid" else "h.score"
                    out[(splitter, i, kind)] = conn.execute(
                        f"select d.doc_id, c.position, {score} as score from {call} as h join ragsql.chunk as c "
                        "on c.id = h.chunk_id join ragsql.document as d on d.id = c.document_id "
                        "order by 3 desc, d.doc_id, c.position", args).fetchall()
    return out


def _assert_equal(after: dict, before: dict) -> None:
    differ = sorted((k for k in before.keys() | after.keys() if before.get(k) != after.get(k)), key=str)
    assert differ == [], f"differ: {differ[:10]}"


@pytest.fixture
def before_tree(tmp_path_factory) -> Path:
    return _release(BEFORE, tmp_path_factory.mktemp("before"))


def test_the_faster_ingest_stores_and_retrieves_what_the_one_before_did(server_url, before_tree, tmp_path):
    """The demo corpus (English and Chinese: postings from SQL and from jieba) and 400 chunks of English text,
    ingested in two chunkings by the code before issue 15 and by this code, each into a database of its own:
    every chunk (span, text, length, embedding), posting, BM25 statistic and version row is equal, and so is every
    top 10 of bm25, vector, fuzzy and hybrid search for the 100 demo questions. A second ingest adding
    documents to an existing version (postings through the partitioned table) keeps them equal."""
    english = _english(tmp_path / "english.jsonl")
    more = _english(tmp_path / "more.jsonl", documents=5, seed=16)
    urls = {}
    try:
        for name, tree in (("before", before_tree), ("after", ROOT)):
            urls[name] = url = _database(server_url, f"ragsql_ingest_{name}")
            assert _ragsql(tree, url, "db", "init").returncode == 0
            for splitter in ("recursive", "character"):
                _ingest(tree, url, DEMO, english, splitter=splitter)
        _assert_equal(stored(urls["after"]), stored(urls["before"]))
        _assert_equal(retrieved(urls["after"]), retrieved(urls["before"]))
        with psycopg.connect(urls["after"]) as conn:  # the new layout is in use
            parts = conn.execute("select count(*) from pg_inherits where inhparent = 'ragsql.chunk_term'::regclass "
                                 "and inhrelid::regclass::text like 'ragsql.chunk_term_v%'").fetchone()[0]
            trigram = conn.execute("select count(*) from pg_indexes where schemaname = 'ragsql' "
                                   "and indexname like 'chunk_trgm_v%'").fetchone()[0]
            assert (parts, trigram) == (2, 2)
            assert conn.execute("select count(*) from ragsql.chunk_term_default").fetchone()[0] == 0
        for name, tree in (("before", before_tree), ("after", ROOT)):
            _ingest(tree, urls[name], DEMO, english, more)
        _assert_equal(stored(urls["after"]), stored(urls["before"]))
        _assert_equal(retrieved(urls["after"]), retrieved(urls["before"]))
    finally:
        for url in urls.values():
            _drop(server_url, url)


def test_a_database_filled_before_is_upgraded_in_place_and_retrieves_the_same(server_url, before_tree, tmp_path):
    """A database installed and filled by the code before issue 15 (two chunkings), upgraded by psql -f
    sql/install.sql (migration 0150): its postings are moved into one partition per version, its trigram index
    becomes one per version, every stored row and every search result is unchanged, and a later ingest of a new
    version and of new documents into an old one works and stays equal to a database that ran the old code."""
    english = _english(tmp_path / "english.jsonl")
    more = _english(tmp_path / "more.jsonl", documents=5, seed=16)
    url = _database(server_url, "ragsql_ingest_upgrade")
    reference = _database(server_url, "ragsql_ingest_upgrade_reference")
    try:
        for target in (url, reference):
            _psql_install(before_tree / "sql" / "install.sql", target)
            for splitter in ("recursive", "character"):
                _ingest(before_tree, target, DEMO, english, splitter=splitter)
        rows, results = stored(url), retrieved(url)
        with psycopg.connect(url) as conn:
            assert conn.execute("select relkind from pg_class where oid = 'ragsql.chunk_term'::regclass"
                                ).fetchone()[0] == "r"
        _psql_install(ROOT / "sql" / "install.sql", url)
        with psycopg.connect(url) as conn:
            assert conn.execute("select relkind from pg_class where oid = 'ragsql.chunk_term'::regclass"
                                ).fetchone()[0] == "p"
            by_partition = conn.execute(
                "select t.tableoid::regclass::text, min(t.version_id), max(t.version_id) from ragsql.chunk_term as t "
                "group by 1 order by 1").fetchall()
            versions = [v for (v,) in conn.execute("select id from ragsql.corpus_version order by id")]
            assert by_partition == [(f"ragsql.chunk_term_v{v}", v, v) for v in versions]
            indexes = {name for (name,) in conn.execute(
                "select indexname from pg_indexes where schemaname = 'ragsql' and tablename = 'chunk'")}
            assert "chunk_text_trgm" not in indexes and {f"chunk_trgm_v{v}" for v in versions} <= indexes
            assert conn.execute("select to_regclass('ragsql.chunk_term_0050')").fetchone()[0] is None
        _assert_equal(stored(url), rows)
        _assert_equal(retrieved(url), results)
        # later ingests: new documents into the old versions, and a new version
        _ingest(ROOT, url, DEMO, english, more)
        _ingest(before_tree, reference, DEMO, english, more)
        _ingest(ROOT, url, DEMO, english, splitter="markdown")
        _ingest(before_tree, reference, DEMO, english, splitter="markdown")
        _assert_equal(stored(url), stored(reference))
        _assert_equal(retrieved(url), retrieved(reference))
    finally:
        _drop(server_url, url)
        _drop(server_url, reference)


def test_the_postings_table_of_a_first_ingest_holds_its_version_only_and_is_checked_when_attached(db):
    """ragsql._postings_table gives a new version a plain table of its own (the same one until attached); it takes
    no posting of another version, and attaching it checks every chunk id as the foreign key would (23503)."""
    corpus = db.execute("insert into ragsql.corpus (name) values ('p') returning id").fetchone()[0]
    version = db.execute("insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder) "
                         "values (%s, 'recursive', 500, 100, 'x') returning id", (corpus,)).fetchone()[0]
    part = db.execute("select ragsql._postings_table(%s)", (version,)).fetchone()[0]
    assert part == f"chunk_term_v{version}"
    assert db.execute("select ragsql._postings_table(%s)", (version,)).fetchone()[0] == part
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction():
        db.execute(f"insert into ragsql.{part} values (%s, 'zz', 1, 1, 1)", (version + 1,))
    db.execute(f"insert into ragsql.{part} values (%s, 'zz', -1, 1, 1)", (version,))
    with pytest.raises(psycopg.errors.ForeignKeyViolation), db.transaction():
        db.execute("select ragsql._attach_postings(%s)", (version,))
    db.execute(f"delete from ragsql.{part}")
    db.execute("select ragsql._attach_postings(%s)", (version,))
    assert db.execute("select ragsql._postings_table(%s)", (version,)).fetchone()[0] is None
    assert db.execute("select relispartition from pg_class where oid = %s::regclass",
                      (f"ragsql.{part}",)).fetchone()[0]


def test_a_login_that_may_not_insert_gets_no_table_of_the_owner(db):
    """The owner's functions that make a partition's table (ragsql._partition_bare behind them) refuse a login that
    may not insert into the partitioned table, with SQLSTATE 42501 naming it: before they shared that helper,
    ragsql._postings_table made a table as the owner for any login that could call it."""
    corpus = db.execute("insert into ragsql.corpus (name) values ('nobody') returning id").fetchone()[0]
    version = db.execute("insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder) "
                         "values (%s, 'recursive', 500, 100, 'x') returning id", (corpus,)).fetchone()[0]
    dataset = db.execute("insert into ragsql.dataset (name) values ('nobody') returning id").fetchone()[0]
    run = db.execute("insert into ragsql.run (name, dataset_id) values ('nobody', %s) returning id",
                     (dataset,)).fetchone()[0]
    db.execute("create role ragsql_test_nobody login")
    db.execute("grant usage on schema ragsql to ragsql_test_nobody")
    db.execute("grant execute on function ragsql._postings_table(bigint), ragsql._run_result_bare(bigint) "
               "to ragsql_test_nobody")
    db.execute("set session authorization ragsql_test_nobody")
    for call, table in (("_postings_table", "chunk_term"), ("_run_result_bare", "run_result")):
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused, db.transaction():
            db.execute(f"select ragsql.{call}(%s)", (version if table == "chunk_term" else run,))
        assert refused.value.diag.message_primary == f"permission denied for table {table}"
    db.execute("reset session authorization")
    assert db.execute("select to_regclass(%s), to_regclass(%s)",
                      (f"ragsql.chunk_term_v{version}", f"ragsql.run_result_r{run}")).fetchone() == (None, None)
