"""Benchmark: `ragsql ingest` of N chunks of English text (offline embedder), this tree against a base commit.

    python bench/ingest_speed.py [--chunks 100000] [--base 4bf92cf] [--runs 1] [--profile] [--json]

Writes one JSONL file of synthetic English documents (words of a Zipfian vocabulary, ~60k distinct at 100k
chunks, stop words among the most frequent; ~4,000 characters a document, so about 10 chunks of 500/100). The
base commit's tree is taken with `git archive` into a temporary folder. One embedded server is started in a
scratch RAGSQL_HOME, and each tree gets a database of its own, installed by its own code. Then each tree
ingests the file in a child process of its own (its PYTHONPATH), calling `ragsql.ingest.ingest` as the CLI
does (offline embedder, recursive 500/100), with the database functions of `ragsql.db.corpus` wrapped by a
timer: the wall time and the server's CPU seconds of each phase (the backend's, and its parallel workers'), the child's
peak RSS and the server backend's peak RSS (VmHWM). The trees alternate, `--runs` times each (the fastest run is
reported), each run in a fresh database.

Phases: "python" is reading, hashing, splitting and embedding (the embed call itself is also shown alone);
"documents" the upsert and fetch of documents; "chunks" the COPY of chunks and what the insert does with them
(tokenising English in SQL, the trigram index where it is kept row by row, the postings the same statement
writes); "postings" the COPY or attach of postings; "trigram index" its build after the load where it is built
then; "HNSW index" the vector index build; "refresh" ragsql.refresh_bm25; "analyze" the final ANALYZE.
"load" is documents + chunks + postings + trigram index: the database side and tokenisation of the issue (its
1,800 chunks/s timed the same COPYs, without the BM25 refresh or the HNSW build). Rates are given per second
of wall time and per second of the server's CPU time (the machine is shared: wall time depends on the
other jobs, CPU time much less).

After the runs, both databases are compared: every stored chunk (document, position, span, text, length,
embedding) and posting (document, position, term, tf, length) must be equal, and so must ragsql.bm25's
top 10 for 200 queries (its median latency, warm, is printed per tree) and ragsql.vector_search and
ragsql.hybrid_search's top 10 (documents, positions and scores) for 20 of them, the vector path exact (index
scans off: an HNSW graph differs from one build to the next, the same tree's too).

Goal (issue 15): >= 10,000 chunks/s for the database side and tokenisation, memory bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from trees import PHASE_TIMER, new_database, tree_of, with_db  # noqa: E402  (bench/ is scripts, not a package)

GOAL = 10_000
HYBRID_QUERIES = 20  # of the 200: vector and hybrid (whose fuzzy path reads many chunks) on these only
CHARS_PER_DOCUMENT = 4_000
STOP = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
]


def write_corpus(path: Path, chunks: int, seed: int = 15) -> tuple[int, list[str]]:
    """A JSONL file of about `chunks` chunks of English-like text (at 500/100); returns (documents, queries)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = int(60_000 * (chunks / 100_000) ** 0.52) + 200
    letters = np.array(list("etaoinshrdlucmfwypvbgkqjxz"))
    weights = 1.0 / np.arange(1, 27) ** 0.7
    lengths = rng.integers(3, 11, vocab)
    words = ["".join(rng.choice(letters, size=n, p=weights / weights.sum())) for n in lengths]
    words = list(dict.fromkeys(STOP + words))
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    documents = chunks // 10
    with path.open("w", encoding="utf-8") as out:
        for d in range(documents):
            picked = rng.choice(len(words), size=CHARS_PER_DOCUMENT // 6, p=p)
            sentences, start = [], 0
            while start < len(picked):
                n = int(rng.integers(6, 20))
                sentences.append(" ".join(words[i] for i in picked[start : start + n]).capitalize() + ".")
                start += n
            paragraphs = [" ".join(sentences[i : i + 5]) for i in range(0, len(sentences), 5)]
            out.write(json.dumps({"id": f"d{d}", "text": "\n\n".join(paragraphs), "language": "en"}) + "\n")
    queries = [
        " ".join(words[i] for i in rng.choice(len(words), size=int(rng.integers(2, 6)), p=p)) for _ in range(200)
    ]
    return documents, queries


# Run in a child process with PYTHONPATH set to one tree: ingest the file with ragsql.db.corpus's functions
# timed by phase (names a tree lacks are skipped), print one JSON line.
_CHILD = (
    r"""
import json, os, resource, sys, time
from ragsql import db
from ragsql.db import corpus as store
from ragsql.embed.hashing import HashingEmbedder
from ragsql.ingest import ingest
from ragsql.llm.settings import EndpointSettings

path, phases = sys.argv[1], json.loads(sys.argv[2])
spent = {}
"""
    + PHASE_TIMER
    + r"""
for phase, names in phases.items():
    for name in names:
        if phase != "embed" and hasattr(store, name):
            setattr(store, name, timed(spent, phase, getattr(store, name)))
embed = HashingEmbedder.embed
async def timed_embed(self, texts):
    started = time.perf_counter()
    try:
        return await embed(self, texts)
    finally:
        wall, _ = spent.get("embed", (0.0, 0.0))
        spent["embed"] = (wall + time.perf_counter() - started, 0.0)
HashingEmbedder.embed = timed_embed
with db.connect() as conn:
    pid = conn.execute("select pg_backend_pid()").fetchone()[0]
    started = time.perf_counter()
    summary = ingest(conn, [path], "bench", settings=EndpointSettings(embedder="offline"))
    total = time.perf_counter() - started
    server_peak = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                server_peak = int(line.split()[1]) / 1024
print(json.dumps({"total": total, "phases": spent, "chunks": summary.chunks, "tokens": summary.tokens,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "server_peak_mb": server_peak}))
"""
)

LOAD = ("documents", "chunks", "postings", "trigram index")
PHASES = {
    "documents": ["stored_hashes", "upsert_documents", "unchunked_documents", "fetch_documents"],
    "chunks": ["add_chunks"],
    "postings": ["postings_table", "add_chunk_terms", "attach_postings"],
    "trigram index": ["ensure_trigram_index"],
    "HNSW index": ["ensure_hnsw_index"],
    "refresh": ["refresh_bm25"],
    "analyze": ["analyze"],
}


def _env(tree: Path, home: Path, url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAGSQL_DATABASE_URL", "PYTHONPATH")}
    env.update(PYTHONPATH=str(tree), RAGSQL_HOME=str(home))
    if url:
        env["RAGSQL_DATABASE_URL"] = url
    return env


def _python(tree: Path, home: Path, url: str | None, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], env=_env(tree, home, url), cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args[:2])} from {tree} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def database(admin_url: str, tree: Path, home: Path, name: str) -> str:
    """A new database `name` with the schema of `tree`, installed by that tree's code."""
    url = new_database(admin_url, name, checkpoint=True)
    _python(tree, home, url, "-m", "ragsql", "db", "init")
    return url


_STORED = {
    "chunks": """select count(*), md5(string_agg(concat_ws(' ', d.doc_id, c.position, c.start_char, c.end_char,
                        md5(c.text), c.length, md5(c.embedding::text)), '|' order by d.doc_id, c.position))
                 from ragsql.chunk as c join ragsql.document as d on d.id = c.document_id""",
    "postings": """select count(*), md5(string_agg(concat_ws(' ', d.doc_id, c.position, t.term, t.tf, t.length), '|'
                          order by d.doc_id, c.position, t.term))
                   from ragsql.chunk_term as t join ragsql.chunk as c on c.id = t.chunk_id
                   join ragsql.document as d on d.id = c.document_id""",
}


def compare(urls: dict[str, str], queries: list[str]) -> dict[str, str]:
    """What the trees' databases hold and answer; exits when they differ."""
    import psycopg

    found: dict[str, dict] = {}
    for name, url in urls.items():
        with psycopg.connect(url) as conn:
            version = conn.execute("select id from ragsql.corpus_version").fetchone()[0]
            out = {key: conn.execute(q).fetchone() for key, q in _STORED.items()}
            hits, times = [], []
            for text in queries:
                terms = [t for (t,) in conn.execute("select term from ragsql.text_terms(%s, 'en')", (text,))]
                for _ in range(2):  # warm, then timed
                    started = time.perf_counter()
                    conn.execute("select * from ragsql.bm25(%s, %s, 10)", (version, terms)).fetchall()
                times.append(time.perf_counter() - started)
            out["bm25_ms"] = statistics.median(times) * 1000
            for text in queries[:HYBRID_QUERIES]:
                terms = [t for (t,) in conn.execute("select term from ragsql.text_terms(%s, 'en')", (text,))]
                embedding = conn.execute(
                    "select embedding from ragsql.chunk where version_id = %s order by id offset %s limit 1",
                    (version, len(hits)),
                ).fetchone()[0]
                for kind, q, params in (
                    ("bm25", "select * from ragsql.bm25(%s, %s, 10)", (version, terms)),
                    ("vector", "select * from ragsql.vector_search(%s, %s::vector, 10)", (version, embedding)),
                    (
                        "hybrid",
                        "select * from ragsql.hybrid_search(%s, %s, %s, %s::vector, 10)",
                        (version, text, terms, embedding),
                    ),
                ):
                    conn.execute("set enable_indexscan = %s" % ("on" if kind == "bm25" else "off"))
                    rows = conn.execute(
                        f"select d.doc_id, c.position, h.score from ({q}) as h join ragsql.chunk as c on c.id = "
                        f"h.chunk_id join ragsql.document as d on d.id = c.document_id order by h.score desc, "
                        f"h.chunk_id",
                        params,
                    ).fetchall()
                    hits.append((kind, rows))
            out["retrieval"] = hits
            found[name] = out
    latency = {name: out.pop("bm25_ms") for name, out in found.items()}
    first, *rest = found.values()
    for name, out in zip(list(found)[1:], rest):
        for key in first:
            if out[key] != first[key]:
                where = (
                    next(
                        (
                            f" ({a[0]} query {i // 3}: {a[1][:3]} against {b[1][:3]})"
                            for i, (a, b) in enumerate(zip(first[key], out[key]))
                            if a != b
                        ),
                        "",
                    )
                    if key == "retrieval"
                    else ""
                )
                sys.exit(f"the trees differ in {key}: {list(found)[0]} and {name}{where}")
    return {key: str(first[key][0]) for key in _STORED} | {"queries": str(HYBRID_QUERIES), "bm25_ms": latency}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="about this many chunks (10 a document)")
    parser.add_argument(
        "--base",
        default="4bf92cf",
        help="git ref to compare with (its tree via git archive; default: the tree before 0150)",
    )
    parser.add_argument("--runs", type=int, default=1, help="ingests per tree (the fastest is reported)")
    parser.add_argument("--only-this", action="store_true", help="time this tree alone (no comparison)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base_sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.base], capture_output=True, text=True, check=True
    ).stdout.strip()
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="ragsql-ingest-speed-") as tmp:
        scratch = Path(tmp)
        trees = {"this tree": ROOT}
        if not args.only_this:
            trees[base_sha] = tree_of(args.base, scratch / "base")
        corpus = scratch / "corpus.jsonl"
        documents, queries = write_corpus(corpus, args.chunks)
        home = scratch / "home"
        admin_url = with_db(_python(ROOT, home, None, "-m", "ragsql", "db", "url").strip(), "postgres")
        urls: dict[str, str] = {}
        try:
            for _ in range(args.runs):
                for i, (name, tree) in enumerate(trees.items()):
                    urls[name] = database(admin_url, tree, home, f"ragsql_bench_ingest_{i}")
                    out = json.loads(
                        _python(tree, home, urls[name], "-c", _CHILD, str(corpus), json.dumps(PHASES)).splitlines()[-1]
                    )
                    results.setdefault(name, []).append(out)
            same = compare(urls, queries)
        finally:
            _python(ROOT, home, None, "-m", "ragsql", "db", "stop")
    best = {name: min(runs, key=lambda r: r["total"]) for name, runs in results.items()}
    if args.json:
        print(json.dumps({"documents": documents, "runs": results, "equal": same}, indent=2))
        return 0
    chunks = best["this tree"]["chunks"]
    print(
        f"`ragsql ingest` of {documents:,} documents, {chunks:,} chunks (offline embedder, recursive 500/100), "
        f"best of {args.runs}; stored rows equal in both trees ({same['chunks']} chunks, {same['postings']} "
        f"postings) and bm25 top 10 equal for 200 queries, vector and hybrid for {same['queries']}; ragsql.bm25 "
        "median ms (warm): " + ", ".join(f"{n} {ms:.2f}" for n, ms in same["bm25_ms"].items())
    )
    names = list(best)
    print("| phase | " + " | ".join(f"{n} s (server CPU s)" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for r in best.values():
        r["phases"]["python"] = [r["total"] - sum(w for w, _ in r["phases"].values()), 0.0]
    for phase in ["python", "embed", *PHASES]:
        cells = []
        for n in names:
            wall, used = best[n]["phases"].get(phase, (0.0, 0.0))
            cells.append(f"{wall:.2f} ({used:.2f})" if phase not in ("python", "embed") else f"{wall:.2f}")
        print(f"| {phase} | " + " | ".join(cells) + " |")
    print()

    def load(r: dict, i: int) -> float:
        return sum(r["phases"].get(p, (0.0, 0.0))[i] for p in LOAD)

    print(
        "| tree | whole ingest s | chunks/s | load s (server CPU s) | load chunks/s | per CPU s | × (CPU) | "
        "HNSW + refresh s | peak RSS MB | server backend peak MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = best[names[-1]]
    for n, r in best.items():
        wall, cpu = load(r, 0), load(r, 1)
        after = sum(r["phases"].get(p, (0.0, 0.0))[0] for p in ("HNSW index", "refresh"))
        print(
            f"| {n} | {r['total']:.1f} | {r['chunks'] / r['total']:,.0f} | {wall:.1f} ({cpu:.1f}) | "
            f"{r['chunks'] / wall:,.0f} | {r['chunks'] / cpu:,.0f} | {load(base, 1) / cpu:.1f} | {after:.1f} | "
            f"{r['peak_mb']:.0f} | {r['server_peak_mb']:.0f} |"
        )
    this = best["this tree"]
    print(
        f"goal {GOAL:,} chunks/s for the database side and tokenisation (load): "
        f"{'met' if chunks / load(this, 0) >= GOAL else 'not met'} ({chunks / load(this, 0):,.0f} per wall second, "
        f"{chunks / load(this, 1):,.0f} per server CPU second)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
