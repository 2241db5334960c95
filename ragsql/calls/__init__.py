"""The call service: every judge, generation, embedding and rerank call goes through the database cache, a
claim on the request and one retrying send, and is stored on connections of its own."""

from ragsql.calls.owner import alive, process_owner
from ragsql.calls.service import CallService, Stored

__all__ = ["CallService", "Stored", "alive", "process_owner"]
