"""Benchmark: BM25 retrieval speed in PostgreSQL (ragsql.bm25) vs bm25s and PostgreSQL full-text search.

    python bench/retrieval_speed.py [--sizes 100000,1000000] [--queries 1000] [--dim 16] [--json]

For each size: generates a synthetic corpus (token ids drawn from a Zipfian vocabulary, lengths as the BM25
lengths of 500-character English chunks, ~48 tokens) and 2-6 term queries drawn from the same distribution
(so most contain frequent terms: the hard case for pruning). Loads it into a scratch database (ragsql_bench_speed
on RAGSQL_DATABASE_URL's server, else the embedded one) through the ingest's own COPY paths: documents with
ragsql.db.corpus.upsert_documents, chunks (with a small random embedding) with add_chunks, postings with
add_chunk_terms (the path of segmented languages) into the version's new postings table, attached at the end
(attach_postings), and the version's trigram index built (ensure_trigram_index), then ragsql.refresh_bm25 as
the ingest's last step. Splitting, tokenising and embedding text are bypassed (the tokens are generated), so "ingest" is
the database side only.

Measured in one run, on the same tokens: load rate (chunks/s), BM25 index build (refresh_bm25), ragsql.bm25
top-10 latency p50/p95 (single queries, warm), batch throughput of all queries in one LATERAL statement (one
and two sessions), hybrid latency (ragsql.hybrid_search: BM25 + pgvector HNSW cosine, 50 candidates each,
fuzzy path off since synthetic tokens have no spelling), PostgreSQL ts_rank_cd over a GIN-indexed tsvector of
the same tokens (OR query; not BM25), and bm25s (method lucene, dtype float64) with its numpy and numba
backends: index time, p50/p95 single query, batch q/s. Every ragsql top-10 is checked against bm25s's (scores
to 1e-6; ids equal but for ties at the 10th score). Prints a markdown table, then EXPLAIN ANALYZE (auto_explain
of the statements inside ragsql.bm25) of a typical query (the median) and of the slowest one.

Vocabulary: Zipf's law (exponent 1) over words, its 150 most frequent ranks taken as the stop words the text
search configuration removes; distinct stems grow with the corpus (60k at 100k chunks, ~200k at 1M). After the
load the new BM25 partition is vacuumed, as autovacuum does soon after an ingest commits.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trees import scratch_database  # noqa: E402
from ragsql.db import corpus as store  # noqa: E402

DBNAME = "ragsql_bench_speed"
CHUNKS_PER_DOCUMENT = 10
STOP_WORDS = 150
SAMPLE = 200  # queries timed for the slower comparisons (unpruned sum, hybrid, vector, ts_rank_cd)
ZIPF_EXPONENT = 1.0
K = 10


# ---------------------------------------------------------------- data


def vocabulary_size(n_chunks: int) -> int:
    """Heaps' law-ish: distinct stems grow with the corpus (~60k at 100k chunks, ~200k at 1M)."""
    return int(60_000 * (n_chunks / 100_000) ** 0.52)


def generate(n_chunks: int, n_queries: int, seed: int = 42):
    """(lengths, token ids per chunk as one flat array + offsets, vocabulary size, queries as id lists)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary_size(n_chunks)
    # Zipf's law (exponent 1) over all words; the STOP_WORDS most frequent ranks are the stop words that the
    # text search configuration removes (to_tsvector('english') drops ~130), so BM25 sees ranks after them
    p = 1.0 / np.arange(STOP_WORDS + 1, STOP_WORDS + vocab + 1) ** ZIPF_EXPONENT
    p /= p.sum()
    # 500-character chunks: ~48 BM25 tokens after stop words; most chunks full, a document's last one shorter
    full = rng.normal(48, 7, n_chunks)
    short = rng.uniform(0.1, 1.0, n_chunks) * 48
    lengths = np.where(rng.random(n_chunks) < 0.85, full, short).round().clip(3, 90).astype(np.int64)
    cdf = np.cumsum(p)
    tokens = np.searchsorted(cdf, rng.random(int(lengths.sum())) * cdf[-1]).astype(np.int64)
    tokens = np.minimum(tokens, vocab - 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    queries = []
    for _ in range(n_queries):
        size = int(rng.integers(2, 7))
        q: list[int] = []
        while len(q) < size:
            t = int(min(np.searchsorted(cdf, rng.random() * cdf[-1]), vocab - 1))
            if t not in q:
                q.append(t)
        queries.append(q)
    return lengths, tokens, offsets, vocab, queries


def term(t: int) -> str:
    return f"t{t}"


def postings(tokens: np.ndarray, offsets: np.ndarray, lo: int, hi: int):
    """(chunk index, term id, tf) of chunks lo..hi-1, from the flat token array."""
    seg = tokens[offsets[lo] : offsets[hi]]
    chunk = np.repeat(np.arange(lo, hi), np.diff(offsets[lo : hi + 1]))
    keys, tf = np.unique(chunk * (1 << 32) + seg, return_counts=True)
    return keys >> 32, keys & 0xFFFFFFFF, tf


# ---------------------------------------------------------------- database


def load(url: str, name: str, lengths, tokens, offsets, dim: int, seed: int = 1) -> dict:
    """Documents, chunks and postings through ragsql.db.corpus (COPY), then refresh_bm25, then HNSW; timed."""
    rng = np.random.default_rng(seed)
    n = len(lengths)
    out: dict = {}
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        corpus_id = store.ensure_corpus(conn, name)
        version, _ = store.ensure_version(conn, corpus_id, "recursive", 500, 100, f"bench:{dim}")
        target = store.postings_table(conn, version)  # as the ingest: a new version's postings, attached at the end
        step = 50_000
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            texts = [" ".join(term(t) for t in tokens[offsets[i] : offsets[i + 1]]) for i in range(lo, hi)]
            docs = []
            for d in range(lo, hi, CHUNKS_PER_DOCUMENT):
                text = " ".join(texts[d - lo : min(hi, d + CHUNKS_PER_DOCUMENT) - lo])
                docs.append((f"d{d // CHUNKS_PER_DOCUMENT}", None, text, "en", {}, f"h{d}", None))
            store.upsert_documents(conn, corpus_id, docs)
            ids = dict(
                conn.execute(
                    "select doc_id, id from ragsql.document where corpus_id = %s and doc_id = any(%s)",
                    (corpus_id, [d[0] for d in docs]),
                ).fetchall()
            )
            vectors = rng.normal(size=(hi - lo, dim)).round(4)
            rows, pos = [], 0
            for i in range(lo, hi):
                p = i % CHUNKS_PER_DOCUMENT
                if p == 0:
                    pos = 0
                text = texts[i - lo]
                rows.append(
                    (
                        ids[f"d{i // CHUNKS_PER_DOCUMENT}"],
                        p + 1,
                        pos,
                        pos + len(text),
                        text,
                        int(lengths[i]),
                        vectors[i - lo].tolist(),
                    )
                )
                pos += len(text) + 1
            store.add_chunks(conn, version, rows, target)
            c, t, f = postings(tokens, offsets, lo, hi)
            doc_ids = [ids[f"d{i // CHUNKS_PER_DOCUMENT}"] for i in range(lo, hi)]
            store.add_chunk_terms(
                conn,
                version,
                (
                    (doc_ids[ci - lo], ci % CHUNKS_PER_DOCUMENT + 1, term(ti), tfi)
                    for ci, ti, tfi in zip(c.tolist(), t.tolist(), f.tolist())
                ),
                target,
            )
        store.attach_postings(conn, version)
        store.ensure_trigram_index(conn, version)  # as the ingest: built after the load, so timed with it
        store.set_dimensions(conn, version, dim)
        out["load_s"] = time.perf_counter() - start
        start = time.perf_counter()
        store.refresh_bm25(conn, corpus_id)
        out["index_s"] = time.perf_counter() - start
        conn.commit()
    out["version"] = version
    return out


def rebuild(url: str, version: int) -> dict:
    """The BM25 index of a corpus an earlier run loaded (--reuse), built again and timed; the load is not."""
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        conn.execute("select ragsql.refresh_bm25(%s)", (version,))
        conn.commit()
        return {"load_s": None, "index_s": time.perf_counter() - start}


def loaded_version(url: str, name: str) -> int | None:
    """The version of a corpus an earlier run loaded and indexed (--reuse), else None."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select cv.id from ragsql.corpus_version as cv join ragsql.corpus as c on c.id = "
            "cv.corpus_id where c.name = %s and cv.bm25_fresh",
            (name,),
        ).fetchone()
    return row[0] if row else None


def prepare(url: str, version: int, dim: int) -> dict:
    """HNSW index (timed when built here), ts_rank_cd's GIN table, vacuum; the chunk ids in generation order."""
    out: dict = {"hnsw_s": None, "fts_s": None}
    fts = f"bench_fts_v{version}"
    with psycopg.connect(url) as conn:
        out["postings"] = conn.execute(
            "select sum(df) from ragsql.bm25_term where version_id = %s", (version,)
        ).fetchone()[0]
        if conn.execute("select to_regclass(%s)", (f"ragsql.{store.hnsw_index_name(version)}",)).fetchone()[0] is None:
            start = time.perf_counter()
            store.ensure_hnsw_index(conn, version, dim)
            conn.commit()
            out["hnsw_s"] = time.perf_counter() - start
        # PostgreSQL's own full-text search on the same tokens, for comparison (not part of ragsql)
        if conn.execute("select to_regclass(%s)", (fts,)).fetchone()[0] is None:
            start = time.perf_counter()
            conn.execute(
                f"create table {fts} as select c.id as chunk_id, to_tsvector('simple', c.text) as tsv "
                f"from ragsql.chunk as c where c.version_id = {int(version)}"
            )
            conn.execute(f"create index {fts}_gin on {fts} using gin (tsv)")
            conn.commit()
            out["fts_s"] = time.perf_counter() - start
        out["chunk_ids"] = np.array(
            [
                r[0]
                for r in conn.execute(
                    "select c.id from ragsql.chunk as c join ragsql.document as d on d.id = c.document_id "
                    "where c.version_id = %s order by (substr(d.doc_id, 2))::bigint, c.position",
                    (version,),
                )
            ]
        )
    with psycopg.connect(url, autocommit=True) as conn:
        # what autovacuum does soon after an ingest commits (the new partition qualifies by its inserts): the
        # visibility map that lets the pruned search read its indexes without visiting the table
        conn.execute(f"vacuum analyze ragsql.chunk_term, ragsql.bm25_list, ragsql.bm25_term, {fts}")
        conn.execute("analyze ragsql.chunk, ragsql.chunk_term")
    return out


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.array(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def timed_each(fn, items, warm: bool = True) -> list[float]:
    if warm:
        for item in items:
            fn(item)
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return times


def ragsql_figures(url: str, version: int, queries: list[list[str]], dim: int) -> dict:
    out: dict = {}
    results: list = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set jit = off")
        bm25 = "select chunk_id, score from ragsql.bm25(%s, %s, 10)"
        times = timed_each(lambda q: conn.execute(bm25, (version, q)).fetchall(), queries)
        out["bm25_p50"], out["bm25_p95"] = percentiles(times)
        out["bm25_times"] = times
        results = [conn.execute(bm25, (version, q)).fetchall() for q in queries]
        unpruned = "select chunk_id, score from ragsql._bm25_full(%s, %s, 10)"
        out["full_p50"], out["full_p95"] = percentiles(
            timed_each(lambda q: conn.execute(unpruned, (version, q)).fetchall(), queries[:SAMPLE])
        )
        conn.execute("create temp table q (i integer, terms text[])")
        with conn.cursor().copy("copy q (i, terms) from stdin") as copy:
            for i, qt in enumerate(queries):
                copy.write_row((i, qt))
        conn.execute("analyze q")
        batch = f"select count(*) from q cross join lateral ragsql.bm25({version}, q.terms, 10) as b"
        conn.execute(batch)
        start = time.perf_counter()
        conn.execute(batch)
        out["batch_qps"] = len(queries) / (time.perf_counter() - start)
        # hybrid: RRF of BM25 and HNSW vector top 50 (fuzzy off)
        rng = np.random.default_rng(9)
        embs = ["[" + ",".join(f"{x:.4f}" for x in rng.normal(size=dim)) + "]" for _ in queries]
        hybrid = (
            "select chunk_id from ragsql.hybrid_search(%s, '', %s, %s::vector, 10, 50, "
            '\'{"bm25": 1, "vector": 1, "fuzzy": 0}\')'
        )
        items = list(zip(queries, embs))[:SAMPLE]
        out["hybrid_p50"], out["hybrid_p95"] = percentiles(
            timed_each(lambda qe: conn.execute(hybrid, (version, qe[0], qe[1])).fetchall(), items)
        )
        vector = "select chunk_id from ragsql.vector_search(%s, %s::vector, 50)"
        out["vector_p50"], out["vector_p95"] = percentiles(
            timed_each(lambda e: conn.execute(vector, (version, e)).fetchall(), embs[:SAMPLE])
        )
        fts = (
            f"select chunk_id, ts_rank_cd(tsv, query) as r from bench_fts_v{int(version)}, "
            "to_tsquery('simple', %s) as query "
            "where tsv @@ query order by r desc, chunk_id limit 10"
        )
        fq = [" | ".join(q) for q in queries[:SAMPLE]]
        out["fts_p50"], out["fts_p95"] = percentiles(timed_each(lambda s: conn.execute(fts, (s,)).fetchall(), fq))
    # two sessions, each one set-based statement over half of the queries; like the one-session batch, each
    # runs its statement once first (warm cache and plans), then both are timed together
    half = len(queries) // 2
    ready = threading.Barrier(3)

    def worker(lo: int, hi: int) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("create temp table q (i integer, terms text[])")
            with c.cursor().copy("copy q (i, terms) from stdin") as copy:
                for i in range(lo, hi):
                    copy.write_row((i, queries[i]))
            c.execute("analyze q")
            statement = f"select count(*) from q cross join lateral ragsql.bm25({version}, q.terms, 10) as b"
            c.execute(statement)
            ready.wait()
            c.execute(statement)

    threads = [
        threading.Thread(target=worker, args=(0, half)),
        threading.Thread(target=worker, args=(half, len(queries))),
    ]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    out["batch2_qps"] = len(queries) / (time.perf_counter() - start)
    out["results"] = results
    return out


def explain(url: str, version: int, terms: list[str]) -> str:
    """EXPLAIN ANALYZE of the statements ragsql.bm25 runs for these terms (auto_explain, nested statements)."""
    lines: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: lines.append(d.message_primary or ""))
        conn.execute("load 'auto_explain'")
        for setting in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_analyze = on",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_buffers = on",
            "auto_explain.log_timing = on",
            "auto_explain.log_level = notice",
            "auto_explain.log_format = text",
        ):
            conn.execute("set " + setting)
        conn.execute("select * from ragsql.bm25(%s, %s, 10)", (version, terms)).fetchall()
    return "\n\n".join(lines)


def bm25s_figures(n_docs: int, tokens, offsets, vocab: int, queries: list[list[int]], threads: int) -> dict:
    import bm25s
    from bm25s.tokenization import Tokenized

    ids = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(n_docs)]
    corpus = Tokenized(ids=ids, vocab={term(t): t for t in range(vocab)})
    qtok = [[term(t) for t in q] for q in queries]
    out: dict = {}
    for backend in ("numpy", "numba"):
        start = time.perf_counter()
        model = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64", backend=backend)
        model.index(corpus, show_progress=False)
        index_s = time.perf_counter() - start

        def one(q, model=model, backend=backend):
            return model.retrieve([q], k=K, show_progress=False, n_threads=1, backend_selection=backend)

        times = timed_each(one, qtok)
        p50, p95 = percentiles(times)
        model.retrieve(qtok[:50], k=K, show_progress=False, n_threads=threads, backend_selection=backend)  # warm
        start = time.perf_counter()
        docs, scores = model.retrieve(qtok, k=K, show_progress=False, n_threads=threads, backend_selection=backend)
        qps = len(qtok) / (time.perf_counter() - start)
        out[backend] = {
            "index_s": index_s,
            "p50": p50,
            "p95": p95,
            "qps": qps,
            "docs": np.asarray(docs),
            "scores": np.asarray(scores),
        }
        del model, one
    return out


def compare(results, chunk_ids: np.ndarray, docs: np.ndarray, scores: np.ndarray) -> list[int]:
    """Indexes of queries whose ragsql top 10 differs from bm25s's (scores to 1e-6, ids but for ties)."""
    bad = []
    for i, got in enumerate(results):
        exp = [(int(chunk_ids[d]), float(s)) for d, s in zip(docs[i], scores[i]) if s > 0]
        if len(got) != len(exp) or any(abs(g[1] - e[1]) > 1e-6 for g, e in zip(got, exp)):
            bad.append(i)
            continue
        if not exp:
            continue
        last = exp[-1][1]
        a = {c for c, s in got if s > last + 1e-9}
        b = {c for c, s in exp if s > last + 1e-9}
        if a != b:
            bad.append(i)
    return bad


def run_size(url: str, n: int, n_queries: int, dim: int, reuse: bool) -> dict:
    t0 = time.perf_counter()
    lengths, tokens, offsets, vocab, queries = generate(n, n_queries)
    gen_s = time.perf_counter() - t0
    name = f"synthetic-{n}"
    version = loaded_version(url, name) if reuse else None
    loaded = rebuild(url, version) if version else load(url, name, lengths, tokens, offsets, dim)
    loaded.update(version=version or loaded["version"])
    loaded.update(prepare(url, loaded["version"], dim))
    qterms = [[term(t) for t in q] for q in queries]
    ours = ragsql_figures(url, loaded["version"], qterms, dim)
    peers = bm25s_figures(n, tokens, offsets, vocab, queries, threads=2)
    mismatches = {b: compare(ours["results"], loaded["chunk_ids"], peers[b]["docs"], peers[b]["scores"]) for b in peers}
    order = np.argsort(ours["bm25_times"])
    typical, worst = int(order[len(order) // 2]), int(order[-1])
    plans = {
        "typical": (qterms[typical], explain(url, loaded["version"], qterms[typical])),
        "worst": (qterms[worst], explain(url, loaded["version"], qterms[worst])),
    }
    return {
        "n": n,
        "vocab": vocab,
        "tokens": int(lengths.sum()),
        "gen_s": gen_s,
        "queries": n_queries,
        **{k: v for k, v in loaded.items() if k != "chunk_ids"},
        **{k: v for k, v in ours.items() if k not in ("results", "bm25_times")},
        "bm25s": {b: {k: v for k, v in f.items() if k not in ("docs", "scores")} for b, f in peers.items()},
        "mismatches": {b: len(m) for b, m in mismatches.items()},
        "mismatch_examples": {b: [qterms[i] for i in m[:3]] for b, m in mismatches.items()},
        "plans": plans,
    }


def secs(value: float | None) -> str:
    """Seconds, or "reused" for a step an earlier run did (--reuse)."""
    return "reused" if value is None else f"{value:.1f} s"


def print_table(rows: list[dict]) -> None:
    print(
        "| corpus | system | index build | load chunks/s | top-10 p50 ms | top-10 p95 ms | batch q/s | top-10 = bm25s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        n = f"{r['n']:,} chunks, {r['postings']:,} postings"
        print(
            f"| {n} | ragsql.bm25 (pruned, PL/pgSQL) | {secs(r['index_s'])} "
            f"| {'reused' if r['load_s'] is None else format(r['n'] / r['load_s'], ',.0f')} "
            f"| {r['bm25_p50']:.2f} | {r['bm25_p95']:.2f} | {r['batch_qps']:.0f} (2 sessions: "
            f"{r['batch2_qps']:.0f}) | {r['queries'] - r['mismatches']['numpy']}/{r['queries']} |"
        )
        print(
            f"| | ragsql._bm25_full (every posting summed, no pruning; {SAMPLE} q.) | | | {r['full_p50']:.2f} "
            f"| {r['full_p95']:.2f} | | |"
        )
        print(
            f"| | ragsql.hybrid_search (BM25 + HNSW top 50, RRF; {SAMPLE} q.) | HNSW {secs(r['hnsw_s'])} | "
            f"| {r['hybrid_p50']:.2f} | {r['hybrid_p95']:.2f} | | |"
        )
        print(f"| | ragsql.vector_search alone (top 50) | | | {r['vector_p50']:.2f} | {r['vector_p95']:.2f} | | |")
        print(
            f"| | PostgreSQL ts_rank_cd, OR query (not BM25; {SAMPLE} q.) | GIN {secs(r['fts_s'])} | "
            f"| {r['fts_p50']:.2f} | {r['fts_p95']:.2f} | | |"
        )
        for b, f in r["bm25s"].items():
            print(
                f"| | bm25s {b} (float64) | {f['index_s']:.1f} s | | {f['p50']:.2f} | {f['p95']:.2f} "
                f"| {f['qps']:.0f} | |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated corpus sizes in chunks")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=16, help="dimensions of the synthetic embeddings")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the bench database and reuse corpora an earlier run loaded (the load is not "
        "timed again; the BM25 index is rebuilt and timed)",
    )
    parser.add_argument("--dbname", default=DBNAME, help="the bench database (dropped first unless --reuse)")
    args = parser.parse_args()
    url = scratch_database(args.dbname, installed=True, reuse=args.reuse)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(run_size(url, n, args.queries, args.dim, args.reuse))
        print(f"[{n:,} chunks done]", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "plans"} for r in rows], indent=2))
        return 0
    import os

    print(
        f"{args.queries} queries of 2-6 Zipfian terms, top {K}, warm cache; {os.cpu_count()} cores; "
        "index build = ragsql.refresh_bm25 (statistics and chunk lists); load = COPY of documents, "
        "chunks and postings (text splitting, tokenising and embedding bypassed)"
    )
    print_table(rows)
    for r in rows:
        print(
            f"\n{r['n']:,} chunks: vocabulary {r['vocab']:,}, {r['tokens']:,} tokens; mismatches vs bm25s: "
            f"{r['mismatches']} {r['mismatch_examples'] if any(r['mismatches'].values()) else ''}"
        )
        for kind, (terms, plan) in r["plans"].items():
            print(f"\n### EXPLAIN ANALYZE inside ragsql.bm25, {kind} query {terms} ({r['n']:,} chunks)\n")
            print("```\n" + plan + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
