"""One folder per judge call (a request's `kind`): its prompt in each language (``en.txt``, ``zh.txt``) and a module
with its reply model, its request builder (``request``) and the offline judge's heuristic (``offline``).

A folder holding only the two prompt files is a yes/no metric of the registry: its request is `prompts.yes_no`'s
and the offline judge has no heuristic for it. The registry's judge task kinds use these calls: several kinds share
one (the answer's ``statements``, ``verify``), so the unit here is the call, not the metric."""

from __future__ import annotations

__all__: list[str] = []
