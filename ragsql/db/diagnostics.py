"""The seeds' diagnostics of a run: threshold checks with advice, and the likely cause per query."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from ragsql.db.rows import dict_rows

__all__ = ["query_causes", "run_checks"]


def run_checks(conn: psycopg.Connection, run: str, judge: str | None = None) -> list[dict]:
    """ragsql.diagnose_run: check_name, value, threshold, passed, advice (default thresholds); judge: whose
    verdicts are read, a model name or 'offline' (default: the newest LLM judge's, else the offline judge's)."""
    return dict_rows(conn, "select * from ragsql.diagnose_run(%s, model => %s)", (run, judge))


def query_causes(conn: psycopg.Connection, run: str, judge: str | None = None) -> tuple[list[str], list[dict]]:
    """ragsql.diagnose_queries' columns (qid, the metrics it reads, cause) and rows; judge as run_checks'."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute("select * from ragsql.diagnose_queries(%s, model => %s)", (run, judge))
        return [c.name for c in cur.description or []], cur.fetchall()
