"""Database layer: connections, the embedded server, schema install, and every SQL text Python sends.

psycopg loads on first use, not at import, so that `ragsql db url` answers in a tenth of a second."""

from ragsql.db.connect import connect, engine
from ragsql.db.install import distribute, distributed, ensure_schema, install, schema_version
from ragsql.db.server import data_home, database_url, embedded_status, ensure_embedded, stop_embedded

__all__ = [
    "connect",
    "data_home",
    "database_url",
    "distribute",
    "distributed",
    "embedded_status",
    "engine",
    "ensure_embedded",
    "ensure_schema",
    "install",
    "schema_version",
    "stop_embedded",
]
