"""Benchmark: Levenshtein distance between whole passages in SQL (ragsql.levenshtein_distance, bit-parallel) against
rapidfuzz (the peer: RAGAS's NonLLMStringSimilarity calls it) and against the cell-by-cell PL/pgSQL table it
replaced (kept here as pg_temp.levenshtein_dp, from commit f864e02), on the same pairs.

    python bench/levenshtein.py [--pairs 20] [--lengths 100,300,1000,3000] [--repeat 3] [--json]

For each length, `pairs` English and `pairs` Chinese passage pairs of two kinds: a random passage and a copy with
about a sixth of its characters edited, and a near copy (three characters edited, as a retrieved chunk against the
gold passage it was cut from); each distance computed by all three; every SQL distance must equal rapidfuzz's. The
old table is timed up to 1,000 characters (it takes about a second a pair there). Prints milliseconds per pair and
the ratio to rapidfuzz. RAGSQL_DATABASE_URL's server, else the embedded one (use a RAGSQL_HOME of your own).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval_metrics import timed  # noqa: E402
from bench.trees import scratch_database  # noqa: E402
from ragsql import db  # noqa: E402
from tests.sql.test_levenshtein import EN, ZH, _texts  # noqa: E402  (the tests' text generator)

OLD_DP = """
create or replace function pg_temp.levenshtein_dp(a text, b text)
returns integer
language plpgsql immutable
as $$
declare
    x text[] := regexp_split_to_array(a, '');
    y text[] := regexp_split_to_array(b, '');
    prev integer[];
    cur integer[];
begin
    if a = '' or b = '' then
        return greatest(length(a), length(b));
    end if;
    prev := array(select generate_series(0, cardinality(y)));
    cur := prev;
    for i in 1 .. cardinality(x) loop
        cur[1] := i;
        for j in 1 .. cardinality(y) loop
            cur[j + 1] := least(prev[j + 1] + 1, cur[j] + 1, prev[j] + (x[i] <> y[j])::integer);
        end loop;
        prev := cur;
    end loop;
    return prev[cardinality(y) + 1];
end
$$;
"""
OLD_DP_LIMIT = 1000


def _near_copy(rng: random.Random, alphabet: str, n: int) -> tuple[str, str]:
    """A random passage and the same with three characters replaced at random places."""
    a = "".join(rng.choice(alphabet) for _ in range(n))
    b = list(a)
    for at in rng.sample(range(n), min(3, n)):
        b[at] = rng.choice(alphabet)
    return a, "".join(b)


def sql_distances(conn: psycopg.Connection, function: str, pairs: list[tuple[str, str]]) -> list[int]:
    return [
        d
        for (d,) in conn.execute(
            f"select {function}(a, b) from unnest(%s::text[], %s::text[]) with ordinality as p(a, b, n) order by n",
            ([a for a, _ in pairs], [b for _, b in pairs]),
        ).fetchall()
    ]


def main() -> int:
    from rapidfuzz.distance import Levenshtein

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20, help="pairs per length and language")
    parser.add_argument("--lengths", default="100,300,1000,3000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    conn = psycopg.connect(scratch_database(), autocommit=True)
    db.install(conn)
    conn.execute(OLD_DP)
    rng = random.Random(15)
    rows = []
    for length in (int(n) for n in args.lengths.split(",")):
        for (lang, alphabet), kind in (
            (language, kind) for kind in ("edited", "near copy") for language in (("en", EN), ("zh", ZH))
        ):
            pairs = [
                _texts(rng, alphabet, length) if kind == "edited" else _near_copy(rng, alphabet, length)
                for _ in range(args.pairs)
            ]
            fast, got = timed(lambda p=pairs: sql_distances(conn, "ragsql.levenshtein_distance", p), args.repeat)
            peer, want = timed(lambda p=pairs: [Levenshtein.distance(a, b) for a, b in p], args.repeat)
            if got != want:
                raise SystemExit(f"SQL and rapidfuzz differ at length {length} ({lang})")
            old = None
            if length <= OLD_DP_LIMIT:
                start = time.perf_counter()
                if sql_distances(conn, "pg_temp.levenshtein_dp", pairs) != want:
                    raise SystemExit(f"the old table differs at length {length} ({lang})")
                old = time.perf_counter() - start
            rows.append(
                {
                    "length": length,
                    "language": lang,
                    "kind": kind,
                    "pairs": len(pairs),
                    "sql_ms": 1000 * fast / len(pairs),
                    "old_sql_ms": old and 1000 * old / len(pairs),
                    "rapidfuzz_ms": 1000 * peer / len(pairs),
                }
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"Levenshtein distance per pair of passages (ms), best of {args.repeat}; distances equal rapidfuzz's")
    print(
        f"{'length':>6} {'lang':>4} {'pairs':>9} {'SQL bit-parallel':>17} {'old SQL table':>14} "
        f"{'rapidfuzz':>10} {'SQL / rapidfuzz':>16} {'old / new':>10}"
    )
    for r in rows:
        old = f"{r['old_sql_ms']:14.1f}" if r["old_sql_ms"] is not None else f"{'-':>14}"
        speedup = f"{r['old_sql_ms'] / r['sql_ms']:9.0f}x" if r["old_sql_ms"] is not None else f"{'-':>10}"
        print(
            f"{r['length']:6} {r['language']:>4} {r['kind']:>9} {r['sql_ms']:17.2f} {old} "
            f"{r['rapidfuzz_ms']:10.4f} {r['sql_ms'] / r['rapidfuzz_ms']:15.0f}x {speedup}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
