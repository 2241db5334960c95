"""Retrieval in SQL: BM25 against bm25s and rank_bm25 on the same tokens, HNSW against exact search, fuzzy
matching, RRF against a hand computation, neighbour expansion, gold spans mapped onto chunks, and a whole
retrieval run feeding the retrieval measures."""

from __future__ import annotations

import math
import random

import bm25s
import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from rank_bm25 import BM25Okapi

DIM = 16


def make_version(db, name: str = "c", k1: float = 1.2, b: float = 0.75, dim: int | None = DIM) -> int:
    corpus = db.execute("insert into ragsql.corpus (name) values (%s) returning id", (name,)).fetchone()[0]
    return db.execute(
        "insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder, dimensions, k1, b) "
        "values (%s, 'recursive', 500, 100, 'test', %s, %s, %s) returning id", (corpus, dim, k1, b)).fetchone()[0]


def add_document(db, version: int, doc_id: str, chunks: list[str], terms: list[list[str]] | None = None,
                 vectors: list[np.ndarray] | None = None, sep: str = " ") -> list[int]:
    """A document made of `chunks` joined by `sep` (no overlap), with the given postings and embeddings."""
    corpus = db.execute("select corpus_id from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
    text = sep.join(chunks)
    doc = db.execute("insert into ragsql.document (corpus_id, doc_id, text, language, content_hash) "
                     "values (%s, %s, %s, 'en', md5(%s)) returning id", (corpus, doc_id, text, text)).fetchone()[0]
    ids, start = [], 0
    for i, chunk in enumerate(chunks):
        tokens = terms[i] if terms else chunk.split()
        vec = vectors[i] if vectors is not None else None
        cid = db.execute(
            "insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, text, length, "
            "embedding) values (%s, %s, %s, %s, %s, %s, %s, %s) returning id",
            (version, doc, i + 1, start, start + len(chunk), chunk, len(tokens), vec)).fetchone()[0]
        counts: dict[str, int] = {}
        for tok in tokens:
            counts[tok] = counts.get(tok, 0) + 1
        for term, tf in counts.items():
            db.execute("insert into ragsql.chunk_term (version_id, term, chunk_id, tf, length) "
                       "values (%s, %s, %s, %s, %s)", (version, term, cid, tf, len(tokens)))
        ids.append(cid)
        start += len(chunk) + len(sep)
    refresh(db, version)
    return ids


def refresh(db, version: int) -> None:
    """Recompute the version's BM25 statistics and chunk lists, as every ingest does at its end."""
    db.execute("select ragsql.refresh_bm25(%s)", (version,))


def zipf_corpus(rng: random.Random, n_docs: int, vocab: int = 300) -> list[list[str]]:
    weights = [1 / (r + 1) for r in range(vocab)]
    words = [f"w{r}" for r in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(n_docs)]


@pytest.fixture
def vec_db(db):
    register_vector(db)
    return db


def test_bm25_equals_bm25s_lucene_float64_to_1e6(vec_db):
    """Scores and top 10 of random Zipfian queries equal bm25s (method lucene, float64), empty chunks included."""
    db = vec_db
    rng = random.Random(7)
    docs = zipf_corpus(rng, 300)
    version = make_version(db, k1=1.2, b=0.75)
    ids = []
    for i in range(0, len(docs), 10):
        ids += add_document(db, version, f"d{i}", [" ".join(d) or "empty" for d in docs[i:i + 10]],
                            terms=docs[i:i + 10])
    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    reference.index(docs, show_progress=False)
    for _ in range(25):
        query = sorted(set(rng.choices([f"w{r}" for r in range(300)], k=rng.randint(1, 5))))
        expected = reference.get_scores(query)
        got = db.execute("select chunk_id, score from ragsql.bm25(%s, %s, 10)", (version, query)).fetchall()
        order = sorted(range(len(docs)), key=lambda i: (-expected[i], ids[i]))
        top = [(ids[i], expected[i]) for i in order if expected[i] > 0][:10]
        assert [c for c, _ in got] == [c for c, _ in top], query
        for (_, s), (_, e) in zip(got, top):
            assert abs(s - e) < 1e-6


def test_bm25_ranks_as_rank_bm25_okapi(vec_db):
    """rank_bm25's Okapi differs only in idf (no +1 inside the log) and the (k1 + 1) factor: with terms that
    occur in fewer than half the chunks both rank the same chunks first."""
    db = vec_db
    docs = [["cat", "sat", "mat"], ["dog", "sat", "log"], ["cat", "dog", "cat"], ["bird", "sky"], ["fish", "sea"]]
    version = make_version(db)
    ids = add_document(db, version, "d", [" ".join(d) for d in docs], terms=docs)
    okapi = BM25Okapi(docs, k1=1.2, b=0.75)
    scores = okapi.get_scores(["bird", "fish"])
    got = db.execute("select chunk_id from ragsql.bm25(%s, %s, 2)", (version, ["bird", "fish"])).fetchall()
    expected = sorted(range(len(docs)), key=lambda i: (-scores[i], ids[i]))[:2]
    assert [c for (c,) in got] == [ids[i] for i in expected]


def test_bm25_parameters_come_from_the_version_and_unknown_terms_score_nothing(vec_db):
    db = vec_db
    docs = [["a", "b"], ["a", "a", "a", "c", "d", "e"]]
    version = make_version(db, k1=2.0, b=0.0)
    ids = add_document(db, version, "d", [" ".join(d) for d in docs], terms=docs)
    n, df = 2, 2
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    got = dict(db.execute("select chunk_id, score from ragsql.bm25(%s, array['a', 'zzz'])", (version,)).fetchall())
    assert got[ids[0]] == pytest.approx(idf * 1 / (1 + 2.0))
    assert got[ids[1]] == pytest.approx(idf * 3 / (3 + 2.0))
    assert db.execute("select count(*) from ragsql.bm25(%s, array['zzz'])", (version,)).fetchone()[0] == 0
    with pytest.raises(Exception, match="unknown corpus version"):
        db.execute("select * from ragsql.bm25(-1, array['a'])")


def test_hnsw_recall_against_exact_search(vec_db):
    """With the version's HNSW index, the top 10 of 20 random queries overlap exact search by at least 90%."""
    db = vec_db
    rng = np.random.default_rng(3)
    version = make_version(db)
    vectors = rng.normal(size=(2000, DIM)).astype(np.float32)
    for i in range(0, 2000, 100):
        add_document(db, version, f"d{i}", [f"chunk {j}" for j in range(i, i + 100)], vectors=list(vectors[i:i + 100]))
    db.execute(f"create index chunk_hnsw_v{version} on ragsql.chunk using hnsw ((embedding::vector({DIM})) "
               f"vector_cosine_ops) where version_id = {version}")
    db.execute("analyze ragsql.chunk")
    plan = "\n".join(r[0] for r in db.execute(
        f"explain select c.id from ragsql.chunk c where c.version_id = {version} "
        f"order by c.embedding::vector({DIM}) <=> %s::vector({DIM}) limit 10", (vectors[0],)).fetchall())
    assert f"chunk_hnsw_v{version}" in plan
    overlap = 0
    for q in rng.normal(size=(20, DIM)).astype(np.float32):
        got = [c for c, _ in db.execute("select * from ragsql.vector_search(%s, %s, 10)", (version, q)).fetchall()]
        exact = [c for (c,) in db.execute(
            "select c.id from ragsql.chunk c where c.version_id = %s order by (c.embedding <=> %s) + 0, c.id limit 10",
            (version, q)).fetchall()]
        overlap += len(set(got) & set(exact))
    assert overlap / 200 >= 0.9
    with pytest.raises(Exception, match="has 3 dimensions"):
        db.execute("select * from ragsql.vector_search(%s, '[1,2,3]'::vector)", (version,))


def test_fuzzy_finds_misspelled_and_chinese_text(vec_db):
    db = vec_db
    version = make_version(db)
    ids = add_document(db, version, "d", ["PostgreSQL stores vectors with pgvector",
                                          "张伟是教研部的老师", "The weather is sunny today"])
    got = db.execute("select chunk_id from ragsql.fuzzy_search(%s, 'pgvectr', 2)", (version,)).fetchall()
    assert got[0][0] == ids[0]
    got = db.execute("select chunk_id from ragsql.fuzzy_search(%s, '教研部老师', 2)", (version,)).fetchall()
    assert got[0][0] == ids[1]


def test_hybrid_is_reciprocal_rank_fusion_of_the_paths(vec_db):
    """hybrid_search equals sum of weight / (60 + rank) over the three paths' own rankings, computed here."""
    db = vec_db
    rng = np.random.default_rng(5)
    version = make_version(db)
    texts = [f"alpha beta {w}" for w in ("gamma", "delta", "alpha", "beta beta", "epsilon", "zeta", "eta")]
    add_document(db, version, "d", texts, vectors=list(rng.normal(size=(len(texts), DIM)).astype(np.float32)))
    query, terms, emb = "alpha beta", ["alpha", "beta"], rng.normal(size=DIM).astype(np.float32)
    weights = {"bm25": 1.0, "vector": 0.5, "fuzzy": 2.0}
    paths = {
        "bm25": db.execute("select chunk_id from ragsql.bm25(%s, %s, 5)", (version, terms)).fetchall(),
        "vector": db.execute("select chunk_id from ragsql.vector_search(%s, %s, 5)", (version, emb)).fetchall(),
        "fuzzy": db.execute("select chunk_id from ragsql.fuzzy_search(%s, %s, 5)", (version, query)).fetchall(),
    }
    fused: dict[int, float] = {}
    for path, rows in paths.items():
        for rank, (cid,) in enumerate(rows, 1):
            fused[cid] = fused.get(cid, 0) + weights[path] / (60 + rank)
    expected = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    got = db.execute("select chunk_id, score from ragsql.hybrid_search(%s, %s, %s, %s, 4, 5, %s)",
                     (version, query, terms, emb, Jsonb(weights))).fetchall()
    assert [c for c, _ in got] == [c for c, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-12)
    only_bm25 = db.execute("select chunk_id from ragsql.hybrid_search(%s, %s, %s, null, 5, 5, %s)",
                           (version, query, terms, Jsonb({"bm25": 1}))).fetchall()
    assert only_bm25 == paths["bm25"]


def test_expanded_text_is_the_neighbours_span_without_repeats(vec_db):
    db = vec_db
    version = make_version(db)
    ids = add_document(db, version, "d", ["one two", "three four", "five six", "seven"])
    assert db.execute("select ragsql.expanded_text(%s, 1)", (ids[1],)).fetchone()[0] == "one two three four five six"
    assert db.execute("select ragsql.expanded_text(%s, 1)", (ids[0],)).fetchone()[0] == "one two three four"
    assert db.execute("select ragsql.expanded_text(%s, 0)", (ids[3],)).fetchone()[0] == "seven"


def _dataset_with_query(db, qid: str = "q1") -> tuple[int, int]:
    ds = db.execute("insert into ragsql.dataset (name) values ('ds') returning id").fetchone()[0]
    q = db.execute("insert into ragsql.query (dataset_id, qid, text) values (%s, %s, 'x') returning id",
                   (ds, qid)).fetchone()[0]
    return ds, q


def test_gold_spans_quotes_and_documents_map_onto_each_chunking(vec_db):
    """A span maps to the chunks it overlaps, in every corpus version; a quote is located; a document-level
    judgment marks all its chunks (coarse); a quote not in the document maps to nothing."""
    db = vec_db
    v1 = make_version(db)
    corpus = db.execute("select corpus_id from ragsql.corpus_version where id = %s", (v1,)).fetchone()[0]
    v2 = db.execute("insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder) "
                    "values (%s, 'character', 10, 0, 'test') returning id", (corpus,)).fetchone()[0]
    a = add_document(db, v1, "docA", ["aaaa bbbb", "cccc dddd", "eeee ffff"])  # spans 0-9, 10-19, 20-29
    doc_a = db.execute("select document_id from ragsql.chunk where id = %s", (a[0],)).fetchone()[0]
    small = []
    for pos, (s, e) in enumerate([(0, 14), (15, 29)], 1):
        small.append(db.execute(
            "insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, text, length) "
            "select %s, id, %s, %s, %s, substr(text, %s, %s), 1 from ragsql.document where id = %s returning id",
            (v2, pos, s, e, s + 1, e - s, doc_a)).fetchone()[0])
    b = add_document(db, v1, "docB", ["gggg", "hhhh"])
    ds, q = _dataset_with_query(db)
    db.execute("insert into ragsql.gold_span (query_id, position, doc_id, start_char, end_char, relevance) "
               "values (%s, 1, 'docA', 12, 16, 2)", (q,))
    db.execute("insert into ragsql.gold_span (query_id, position, doc_id, quote) values (%s, 2, 'docA', 'eeee')", (q,))
    db.execute("insert into ragsql.gold_span (query_id, position, doc_id, quote) values (%s, 3, 'docA', 'nowhere')",
               (q,))
    db.execute("insert into ragsql.judgment (query_id, docno, relevance) values (%s, 'docB', 1)", (q,))
    rows = db.execute("select docno, relevance, coarse from ragsql.version_judgment(%s, %s) order by docno",
                      (v1, ds)).fetchall()
    assert sorted(rows) == sorted([(f"c{a[1]}", 2, False), (f"c{a[2]}", 1, False),
                                   (f"c{b[0]}", 1, True), (f"c{b[1]}", 1, True)])
    rows = db.execute("select docno, relevance from ragsql.version_judgment(%s, %s)", (v2, ds)).fetchall()
    assert sorted(rows) == sorted([(f"c{small[0]}", 2), (f"c{small[1]}", 2)])  # docB has no chunk in v2


def test_a_retrieval_run_feeds_the_retrieval_measures(vec_db):
    """retrieve_run writes ranked chunks for every query in one statement; measures read the mapped gold."""
    db = vec_db
    version = make_version(db)
    ids = add_document(db, version, "docA", ["apple banana", "cherry date", "apple apple fig"])
    ds, q = _dataset_with_query(db)
    q2 = db.execute("insert into ragsql.query (dataset_id, qid, text) values (%s, 'q2', 'y') returning id",
                    (ds,)).fetchone()[0]
    db.execute("insert into ragsql.gold_span (query_id, position, doc_id, quote) values (%s, 1, 'docA', 'apple fig')",
               (q,))
    db.execute("insert into ragsql.gold_span (query_id, position, doc_id, quote) values (%s, 1, 'docA', 'cherry')",
               (q2,))
    run = db.execute("insert into ragsql.run (name, dataset_id) values ('r', %s) returning id", (ds,)).fetchone()[0]
    db.execute("insert into ragsql.retrieval_run (run_id, version_id, mode, k, candidates, expand) "
               "values (%s, %s, 'bm25', 2, 10, 1)", (run, version))
    db.execute("insert into ragsql.retrieval_query (run_id, query_id, text, terms) values "
               "(%s, %s, 'apple', array['apple']), (%s, %s, 'banana', array['banana'])", (run, q, run, q2))
    assert db.execute("select ragsql.retrieve_run(%s)", (run,)).fetchone()[0] == 3
    rows = db.execute("select q.qid, r.rank, r.docno, r.text from ragsql.run_result r "
                      "join ragsql.query q on q.id = r.query_id order by 1, 2").fetchall()
    assert rows == [("q1", 1, f"c{ids[2]}", "cherry date apple apple fig"),
                    ("q1", 2, f"c{ids[0]}", "apple banana cherry date"),
                    ("q2", 1, f"c{ids[0]}", "apple banana cherry date")]
    values = dict(db.execute("select qid, value from ragsql.measure('r', 'RR@10')").fetchall())
    assert values == {"q1": 1.0, "q2": 0.0}


def bulk_version(db, docs: list[list[str]], name: str = "z") -> tuple[int, list[int]]:
    """A version whose chunks hold `docs` (token lists), inserted set-based, then refreshed; chunk ids in order."""
    version = make_version(db, name=name, dim=None)
    corpus = db.execute("select corpus_id from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
    doc = db.execute("insert into ragsql.document (corpus_id, doc_id, text, language, content_hash) "
                     "values (%s, 'all', 'x', 'en', 'h') returning id", (corpus,)).fetchone()[0]
    ids = [r[0] for r in db.execute(
        "insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, text, length) "
        "select %s, %s, p, 0, 1, 'x', l from unnest(%s::integer[]) with ordinality as u (l, p) order by p "
        "returning id", (version, doc, [len(d) for d in docs])).fetchall()]
    rows = [(ids[i], t, tf, len(d)) for i, d in enumerate(docs) for t, tf in sorted(_counts(d).items())]
    db.execute("insert into ragsql.chunk_term (version_id, term, chunk_id, tf, length) "
               "select %s, t, c, f, l from unnest(%s::bigint[], %s::text[], %s::integer[], %s::integer[]) "
               "as u (c, t, f, l)",
               (version, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]))
    refresh(db, version)
    # statistics of this data: an earlier rolled-back test's analyze may have left chunk's reltuples near 0
    # (pg_class is updated in place), and _bm25_exact planned for an empty table ran for minutes
    db.execute("analyze ragsql.chunk, ragsql.chunk_term")
    return version, ids


def _counts(tokens: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for tok in tokens:
        out[tok] = out.get(tok, 0) + 1
    return out


def test_pruned_top_k_equals_the_unpruned_sum_on_frequent_term_queries(vec_db):
    """On a Zipfian corpus, queries of frequent terms (long posting lists, many near-equal and tied scores) and
    mixed ones: the pruned ragsql.bm25 (chunk lists met and bounded by band) returns the same chunks and scores
    as the plain sum over every posting and as the per-query formula, for k = 1, 10 and 50."""
    db = vec_db
    rng = random.Random(11)
    vocab = 2000
    weights = [1 / (r + 1) for r in range(vocab)]
    words = [f"w{r}" for r in range(vocab)]
    docs = [rng.choices(words, weights, k=rng.randint(5, 60)) for _ in range(3000)]
    version, _ = bulk_version(db, docs)
    assert db.execute("select bm25_fresh, bm25_lists from ragsql.corpus_version where id = %s",
                      (version,)).fetchone() == (True, True)
    queries = [sorted(set(rng.choices(words[:12], k=rng.randint(2, 5)))) for _ in range(25)]
    queries += [sorted(set(rng.choices(words, weights, k=rng.randint(2, 6)))) for _ in range(25)]
    queries += [["w0"], ["w1", "w2"], ["w0", "w1", "w2", "w3", "w4", "w5"], ["w3", "w1999", "nope"],
                ["w1500", "w1700"], ["w0", "w1998"]]
    paths: list[str] = []
    db.add_notice_handler(lambda d: paths.append(d.message_primary or ""))
    # prune however short the lists (0), and the default choice (sum lists of up to 2000 postings)
    db.execute("set local client_min_messages = debug1")
    for above in ("0", ""):
        db.execute("select set_config('ragsql.bm25_prune_above', %s, true)", (above,))
        for query in queries:
            for k in (1, 10, 50):
                pruned = db.execute("select chunk_id, score from ragsql.bm25(%s, %s, %s)",
                                    (version, query, k)).fetchall()
                full = db.execute("select chunk_id, score from ragsql._bm25_full(%s, %s, %s)",
                                  (version, query, k)).fetchall()
                exact = db.execute("select chunk_id, score from ragsql._bm25_exact(%s, %s, %s)",
                                   (version, query, k)).fetchall()
                assert len(pruned) == len(full) == len(exact) == min(k, len(pruned) or k), (above, query, k)
                assert [c for c, _ in pruned] == [c for c, _ in full] == [c for c, _ in exact], \
                    (above, query, k, pruned, full, exact)
                assert [s for _, s in pruned] == pytest.approx([s for _, s in exact], abs=1e-12)
    # both ways were taken: candidates pruned from the lists, and every posting summed when pruning left more
    pruned_runs = [p for p in paths if "candidates scored" in p]
    assert len(pruned_runs) > 100 and any("every posting summed" in p for p in paths)


def test_chunk_lists_hold_every_posting_once_sorted_with_true_band_bounds(vec_db):
    """ragsql.refresh_bm25's lists: per term, its bands together hold exactly the chunks of its postings,
    each once, sorted; a band's ub is at least the score of every posting in it (to rounding) and is reached
    by one of them; bm25_term's df and ub agree with the postings."""
    db = vec_db
    rng = random.Random(3)
    words = [f"w{r}" for r in range(400)]
    docs = [rng.choices(words, [1 / (r + 1) for r in range(400)], k=rng.randint(1, 40)) for _ in range(800)]
    version, _ = bulk_version(db, docs, name="lists")
    rows = db.execute(
        "select l.term, l.band, l.ub, l.chunk_ids from ragsql.bm25_list as l where l.version_id = %s", (version,)
    ).fetchall()
    scores: dict[str, dict[int, float]] = {}
    for term, cid, score in db.execute(
            "select ct.term, ct.chunk_id, ragsql._bm25_term_score(t.idf, ct.tf, ct.length, v) "
            "from ragsql.chunk_term as ct join ragsql.bm25_term as t using (version_id, term) "
            "join ragsql.corpus_version as v on v.id = ct.version_id where ct.version_id = %s", (version,)):
        scores.setdefault(term, {})[cid] = score
    listed: dict[str, list[int]] = {}
    for term, band, ub, ids in rows:
        assert ids == sorted(set(ids)) and ids, (term, band)
        band_scores = [scores[term][c] for c in ids]
        assert max(band_scores) <= ub * (1 + 1e-12) and max(band_scores) == pytest.approx(ub, rel=1e-12)
        listed.setdefault(term, []).extend(ids)
    assert {t: sorted(ids) for t, ids in listed.items()} == {t: sorted(s) for t, s in scores.items()}
    assert len({band for _, band, _, _ in rows}) == 4  # frequent terms are split into all four bands
    stats = {t: (df, ub) for t, df, ub in db.execute(
        "select term, df, ub from ragsql.bm25_term where version_id = %s", (version,))}
    for term, s in scores.items():
        assert stats[term][0] == len(s) and stats[term][1] == pytest.approx(max(s.values()), rel=1e-12)


def test_chunk_ids_beyond_the_integer_range_sum_every_posting_exactly(fresh_db):
    """The lists store chunk ids as integers: a version whose chunk ids exceed that range gets no lists
    (bm25_lists false), and ragsql.bm25 sums every posting instead, still exact."""
    with psycopg.connect(fresh_db) as db:  # a database of its own: sequences do not roll back
        db.execute("select setval('ragsql.chunk_id_seq', 3000000000)")
        rng = random.Random(8)
        docs = zipf_corpus(rng, 200, vocab=80)
        version, ids = bulk_version(db, docs, name="big ids")
        assert min(ids) > 2**31
        assert db.execute("select bm25_fresh, bm25_lists from ragsql.corpus_version where id = %s",
                          (version,)).fetchone() == (True, False)
        assert db.execute("select count(*) from ragsql.bm25_list where version_id = %s", (version,)).fetchone()[0] == 0
        db.execute("set local ragsql.bm25_prune_above = 0")
        for query in (["w0", "w1"], ["w2", "w5", "w40"]):
            got = db.execute("select chunk_id, score from ragsql.bm25(%s, %s, 10)", (version, query)).fetchall()
            exact = db.execute("select chunk_id, score from ragsql._bm25_exact(%s, %s, 10)", (version, query)).fetchall()
            assert got and [c for c, _ in got] == [c for c, _ in exact]
            assert [s for _, s in got] == pytest.approx([s for _, s in exact], abs=1e-12)


def test_stale_statistics_are_never_used_and_a_refresh_makes_them_exact_again(vec_db):
    """Adding chunks changes N and avglen, so every stored score is stale: the version is marked so at once
    (bm25 then computes the formula per query, still equal to bm25s), and ragsql.refresh_bm25 recomputes them."""
    db = vec_db
    rng = random.Random(5)
    docs = zipf_corpus(rng, 120, vocab=60)
    version = make_version(db)
    ids = add_document(db, version, "a", [" ".join(d) or "empty" for d in docs[:60]], terms=docs[:60])
    before = db.execute("select bm25_chunks, bm25_avgdl from ragsql.corpus_version where id = %s",
                        (version,)).fetchone()
    query = ["w1", "w4", "w9"]
    old = dict(db.execute("select chunk_id, score from ragsql.bm25(%s, %s, 60)", (version, query)).fetchall())
    # a document added straight with SQL (no refresh yet): statistics flagged stale by the triggers
    corpus = db.execute("select corpus_id from ragsql.corpus_version where id = %s", (version,)).fetchone()[0]
    doc = db.execute("insert into ragsql.document (corpus_id, doc_id, text, language, content_hash) "
                     "values (%s, 'b', 'x', 'en', 'h') returning id", (corpus,)).fetchone()[0]
    for i, d in enumerate(docs[60:]):
        cid = db.execute("insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, text, "
                         "length) values (%s, %s, %s, 0, 1, 'x', %s) returning id",
                         (version, doc, i + 1, len(d))).fetchone()[0]
        ids.append(cid)
        for term, tf in _counts(d).items():
            db.execute("insert into ragsql.chunk_term (version_id, term, chunk_id, tf, length) "
                       "values (%s, %s, %s, %s, %s)", (version, term, cid, tf, len(d)))
    assert db.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0] is False
    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    reference.index(docs, show_progress=False)
    expected = reference.get_scores(query)

    def check() -> dict[int, float]:
        got = db.execute("select chunk_id, score from ragsql.bm25(%s, %s, 200)", (version, query)).fetchall()
        assert len(got) == sum(1 for e in expected if e > 0)
        for cid, score in got:
            assert abs(score - expected[ids.index(cid)]) < 1e-6
        return dict(got)

    stale_path = check()
    db.execute("select ragsql.refresh_bm25(%s)", (version,))
    after = db.execute("select bm25_chunks, bm25_avgdl, bm25_fresh from ragsql.corpus_version where id = %s",
                       (version,)).fetchone()
    assert after[0] == 120 and before[0] == 60 and after[1] != before[1] and after[2] is True
    fast_path = check()
    assert fast_path == pytest.approx(stale_path, abs=1e-12)
    assert any(abs(fast_path[c] - s) > 1e-6 for c, s in old.items())  # the old scores were stale indeed
    # the stored statistics are those of the whole version
    df = dict(db.execute("select term, count(*) from ragsql.chunk_term where version_id = %s group by term",
                         (version,)).fetchall())
    stored = dict(db.execute("select term, df from ragsql.bm25_term where version_id = %s", (version,)).fetchall())
    assert stored == df


def test_refresh_refuses_postings_whose_length_is_not_their_chunks(vec_db):
    """chunk_term repeats each chunk's length so the index alone scores a posting: postings loaded by hand with
    another length would give wrong scores, so ragsql.refresh_bm25 stops with one clear error naming the
    version and the fix, and the version's statistics stay as they were (stale: bm25 stays exact)."""
    db = vec_db
    version = make_version(db, name="bad lengths")
    add_document(db, version, "a", ["alpha beta", "beta gamma delta"])
    db.execute("update ragsql.chunk_term set length = length + 1 where version_id = %s and term = 'beta'", (version,))
    assert db.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0] is False
    with pytest.raises(psycopg.errors.DataException, match=f"corpus version {version}: 2 postings checked") as err, \
            db.transaction():
        db.execute("select ragsql.refresh_bm25(%s)", (version,))
    assert "update ragsql.chunk_term" in err.value.diag.message_hint
    assert db.execute("select bm25_fresh from ragsql.corpus_version where id = %s", (version,)).fetchone()[0] is False
    exact = db.execute("select chunk_id, score from ragsql._bm25_exact(%s, %s, 5)", (version, ["beta"])).fetchall()
    assert db.execute("select chunk_id, score from ragsql.bm25(%s, %s, 5)", (version, ["beta"])).fetchall() == exact
