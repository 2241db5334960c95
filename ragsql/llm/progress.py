"""Progress of a long step (ingest, generate, judge, synth, ragsql.evaluate): a transient bar with count, rate and
time left on a terminal or in a notebook, nothing at all elsewhere."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["progress"]


@contextlib.contextmanager
def progress(console: Console, label: str, unit: str = "") -> Iterator[Callable[..., None]]:
    """A transient progress bar on a terminal or in a notebook, nothing at all elsewhere (a pipe, a file, CI); yields
    on_progress(done, total, note=""): done may be fractional (a step part done), `unit` names what is counted.
    Count, rate and time left show from the second update on, the rate as the mean since the step began."""
    if not (console.is_terminal or console.is_jupyter):
        yield lambda done, total, note="": None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task) -> Text:
            elapsed = task.elapsed or 0.0
            if not task.completed or elapsed < 0.5:
                return Text("")
            rate = task.completed / elapsed
            return Text(f"{rate:.1f} {unit or 'items'}/s" if rate >= 0.1 else f"{1 / rate:.0f} s per {unit or 'item'}")

    with Progress(
        TextColumn(label, markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit, markup=False),
        TextColumn("{task.fields[note]}", markup=False),
        Rate(),
        TimeElapsedColumn(),
        TextColumn("left", markup=False),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("items", total=None, note="")
        yield lambda done, total, note="": bar.update(task, completed=done, total=total, note=note)
