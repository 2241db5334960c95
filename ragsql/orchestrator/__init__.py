"""Judge orchestrator: turns a run's answers into stored verdicts through the judge and the embedder."""

# __all__ names submodules, imported on first use (a star import loads them): pyright takes them for missing names
# pyright: reportUnsupportedDunderAll=false
__all__ = ["runner", "service", "setup", "tasks", "watch"]
