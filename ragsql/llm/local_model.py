"""Local models through sentence-transformers (an optional extra): the import, and loading with no network for a
directory, no progress bars, and one-line errors."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragsql.errors import JudgeError, RagsqlError

__all__ = ["cache_dir", "load_model", "model_source", "require_extra"]

_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


def cache_dir() -> Path:
    """RAGSQL_CACHE_DIR, else the user's cache dir (e.g. ~/.cache/ragsql): what local models derive once for every
    RAGSQL_HOME."""
    import platformdirs

    return Path(os.environ.get("RAGSQL_CACHE_DIR") or platformdirs.user_cache_dir("ragsql")).expanduser()


def require_extra(module: str, user: str, extra: str = "local") -> Any:
    """The imported `module`; JudgeError naming the install command when it (or torch) is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise JudgeError(
            f'{user} needs the optional extra {extra!r}: pip install -e ".[{extra}]" in a ragsql checkout'
        ) from None


def load_model(
    factory: Callable[..., Any], model: str, *, what: str, error: type[RagsqlError] = JudgeError, **kwargs: Any
) -> Any:
    """``factory(model, **kwargs)``, a directory with ``local_files_only``; `error` in one line if it cannot load."""
    directory = _directory(model)
    if directory is not None:
        source, kwargs = str(directory), {**kwargs, "local_files_only": True}
    elif model.startswith(_PATH_PREFIXES):
        raise error(f"cannot load {what} {model!r}: no such directory")
    else:
        source = model
    quiet = _quiet_progress_bars()
    try:
        return factory(source, **kwargs)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise error(f"cannot load {what} {model!r}: " + " ".join(str(exc).split())[:300]) from None
    finally:
        quiet()


def model_source(model: str) -> str:
    """The absolute path of `model` when it is a directory, else `model` itself (a hub name)."""
    directory = _directory(model)
    return str(directory) if directory is not None else model


def _directory(model: str) -> Path | None:
    path = Path(model).expanduser()
    return path.resolve() if path.is_dir() else None


def _quiet_progress_bars() -> Callable[[], None]:
    """Turn transformers' loading bars off (they would print to stderr); returns what turns them back on."""
    try:
        logging = importlib.import_module("transformers.utils.logging")
    except ImportError:
        return lambda: None
    if not logging.is_progress_bar_enabled():
        return lambda: None
    logging.disable_progress_bar()
    return logging.enable_progress_bar
