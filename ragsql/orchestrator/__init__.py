"""Judge orchestrator: turns a run's answers into stored verdicts through the judge and the embedder."""

__all__ = ["runner", "service", "setup", "tasks"]
