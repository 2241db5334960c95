"""One folder per judge call (a request's `kind`): its prompt in each language (``en.txt``, ``zh.txt``) and a module
with its reply model, its request builder (``request``) and the offline judge's heuristic (``offline``).

A folder holding only the two prompt files is a yes/no metric of the registry: its request is `prompts.yes_no`'s
and the offline judge has no heuristic for it. The registry's judge task kinds use these calls: several kinds share
one (the answer's ``statements``, ``verify``), so the unit here is the call, not the metric."""

from __future__ import annotations

import importlib
from importlib import resources
from types import ModuleType

__all__ = ["CALLS", "GENERATION", "PROMPTS", "module"]

GENERATION = ("generate", "synthesize")
"""Calls that write rather than judge: answers (`ragsql generate`) and eval questions (`ragsql synth`)."""
PROMPTS = tuple(
    sorted(d.name for d in resources.files(__name__).iterdir() if d.is_dir() and d.joinpath("en.txt").is_file())
)
"""Every prompt folder here."""
CALLS = tuple(
    n
    for n in PROMPTS
    if n not in GENERATION and resources.files(__name__).joinpath(n).joinpath("__init__.py").is_file()
)
"""The judge calls with a module of their own (not a yes/no metric's prompt files alone)."""


def module(name: str) -> ModuleType | None:
    """The module of call `name`, None when it has none (a yes/no metric's folder, or no folder)."""
    return importlib.import_module(f"{__name__}.{name}") if name in CALLS or name in GENERATION else None


def __getattr__(name: str) -> ModuleType:
    """A call's module as an attribute (``kinds.verify``), imported on first use."""
    found = module(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found
