"""ragsql: RAG evaluation that lives in PostgreSQL.

The Python API (`ragsql.api`, loaded on first use so that `import ragsql` stays light):

    result = ragsql.evaluate(records, metrics=["faithfulness", "nDCG@10"])   # list of dicts or a DataFrame
    result.scores, result.to_pandas()
    ragsql.metrics("run"), ragsql.compare("run_a", "run_b")                  # DataFrames
    ragsql.connect(), ragsql.engine()                                        # psycopg / SQLAlchemy
    ragsql.synth("corpus", "dataset", n=50)                                  # an eval set from documents
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragsql._version import __version__
from ragsql.errors import InputError, UsageError

if TYPE_CHECKING:
    from ragsql.api import Evaluation, compare, connect, engine, evaluate, metrics, synth

__all__ = [
    "Evaluation",
    "InputError",
    "UsageError",
    "__version__",
    "compare",
    "connect",
    "engine",
    "evaluate",
    "metrics",
    "synth",
]

_API = {"Evaluation", "compare", "connect", "engine", "evaluate", "metrics", "synth"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from ragsql import api

        return getattr(api, name)
    raise AttributeError(f"module 'ragsql' has no attribute {name!r}")
