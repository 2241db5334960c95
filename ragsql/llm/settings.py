"""Where the judge and the embedder are, read from the environment (RAGSQL_JUDGE_* first, then OPENAI_*)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from ragsql.errors import InputError, UsageError

__all__ = ["DEFAULT_EMBED_MODEL", "DEFAULT_JUDGE_MODEL", "EndpointSettings"]

DEFAULT_JUDGE_MODEL = "gpt-4o-mini"
DEFAULT_EMBED_MODEL = "text-embedding-3-small"


def _number(env: Mapping[str, str], name: str, kind: type = float) -> float | int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise InputError(f"{name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise InputError(f"{name} must be positive, got {raw!r}")
    return value


def _temperature(env: Mapping[str, str]) -> float | None:
    """RAGSQL_JUDGE_TEMPERATURE: 0 (the default) to 2."""
    raw = env.get("RAGSQL_JUDGE_TEMPERATURE")
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"RAGSQL_JUDGE_TEMPERATURE must be a number, got {raw!r}") from None
    if not 0 <= value <= 2:
        raise InputError(f"RAGSQL_JUDGE_TEMPERATURE must be between 0 and 2, got {raw!r}")
    return value


@dataclass(frozen=True)
class EndpointSettings:
    """An OpenAI-compatible endpoint and how hard ragsql may use it."""

    base_url: str | None = None
    api_key: str | None = None
    model: str = DEFAULT_JUDGE_MODEL
    embed_model: str = DEFAULT_EMBED_MODEL
    timeout: float = 60.0
    max_retries: int = 4
    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int = 2048
    embedder: str | None = None  # the spec `ingest` uses when none is given (RAGSQL_EMBEDDER); None: auto

    @property
    def configured(self) -> bool:
        """True when an endpoint or a key is set; otherwise ragsql judges and embeds offline."""
        return bool(self.base_url or self.api_key)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> EndpointSettings:
        """Settings from RAGSQL_JUDGE_{BASE_URL,API_KEY,MODEL,RPM,TPM,CONCURRENCY,TIMEOUT,TEMPERATURE},
        RAGSQL_EMBED_MODEL, RAGSQL_EMBEDDER and OPENAI_{BASE_URL,API_KEY}; keyword overrides (None = keep) win
        over the environment."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "base_url": env.get("RAGSQL_JUDGE_BASE_URL") or env.get("OPENAI_BASE_URL") or None,
            "api_key": env.get("RAGSQL_JUDGE_API_KEY") or env.get("OPENAI_API_KEY") or None,
            "model": env.get("RAGSQL_JUDGE_MODEL") or DEFAULT_JUDGE_MODEL,
            "embed_model": env.get("RAGSQL_EMBED_MODEL") or DEFAULT_EMBED_MODEL,
            "embedder": env.get("RAGSQL_EMBEDDER", "").strip() or None,
            "rpm": _number(env, "RAGSQL_JUDGE_RPM"),
            "tpm": _number(env, "RAGSQL_JUDGE_TPM"),
            "concurrency": _number(env, "RAGSQL_JUDGE_CONCURRENCY", int),
            "timeout": _number(env, "RAGSQL_JUDGE_TIMEOUT"),
            "temperature": _temperature(env),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        return replace(cls(), **{k: v for k, v in values.items() if v is not None})

    @classmethod
    def for_judge(cls, judge: str | None, otherwise: str) -> EndpointSettings:
        """The settings a judge named as `judge` (None: the configured endpoint, else offline; "offline"; or a model)
        uses; a model with no endpoint configured is a UsageError ending with `otherwise` (how to judge offline)."""
        settings = cls.from_env(model=None if judge in (None, "offline") else judge)
        if judge not in (None, "offline") and not settings.configured:
            raise UsageError(
                f"judge {judge!r} needs an endpoint: set RAGSQL_JUDGE_BASE_URL and RAGSQL_JUDGE_API_KEY "
                f"(or OPENAI_*), or {otherwise}"
            )
        return settings
