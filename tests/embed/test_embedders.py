"""Embedders: the offline hashing embedder (deterministic, Chinese and English), `make_embedder` specs, the
sentence-transformers extra's import error, and `OpenAIEmbedder` through the real openai client against the
fake OpenAI-compatible server (batching, retries, call records, failures)."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest

from ragsql.embed import (
    EmbeddingFailed,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
)
from ragsql.errors import InputError, JudgeError
from ragsql.llm.calls import request_hash
from ragsql.llm.settings import EndpointSettings
from tests.conftest import run_then_close
from tests.fake_openai import FakeOpenAI

PROBE = ["Paris is the capital of France.", "张伟是教研部的成员", "？！"]


def _embed(embedder, texts):
    return run_then_close(embedder, lambda e: e.embed(texts))


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_hashing_vectors_are_unit_length_with_the_named_dimension():
    """Every vector has `dim` components and norm 1, punctuation-only text included; the name carries the dim."""
    for dim in (384, 64):
        embedder = HashingEmbedder(dim)
        vectors, records = _embed(embedder, PROBE)
        assert embedder.name == f"offline:hash-ngram-v1:{dim}" and embedder.offline and records == []
        assert [len(v) for v in vectors] == [dim] * len(PROBE)
        assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-9 for v in vectors)


def test_hashing_is_deterministic_across_processes_and_hash_seeds():
    """Two interpreters with different PYTHONHASHSEED produce the same vectors as this one."""
    code = (
        "import json; from ragsql.embed import HashingEmbedder; "
        f"print(json.dumps(HashingEmbedder().vectors({PROBE!r}).round(12).tolist()))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip() == str(HashingEmbedder().vectors(PROBE).round(12).tolist()).replace("'", '"')


@pytest.mark.parametrize(
    "anchor, related, unrelated",
    [
        ("The cat sat on the mat.", "A cat was sitting on the mat.", "Quarterly revenue grew by ten percent."),
        ("What is the capital of France?", "Paris is the capital of France.", "Bananas are rich in potassium."),
        ("张伟是教研部的成员", "张伟是教研部的", "牛顿发现了万有引力"),
        ("张伟是哪个部门的？", "张伟在教研部工作。", "今天的天气非常好。"),
    ],
)
def test_hashing_related_texts_are_clearly_closer_than_unrelated(anchor, related, unrelated):
    """Texts sharing words or characters score a clearly higher cosine; identical texts score 1."""
    (a, r, u, same), _ = _embed(HashingEmbedder(), [anchor, related, unrelated, anchor])
    assert _cos(a, same) == pytest.approx(1.0)
    assert _cos(a, r) > _cos(a, u) + 0.1, (anchor, _cos(a, r), _cos(a, u))


def test_hashing_refuses_empty_text():
    """An empty or blank text raises ValueError naming the item (a zero vector would mean 'no value')."""
    with pytest.raises(ValueError, match=r"empty text \(item 2 of 2\)"):
        _embed(HashingEmbedder(), ["ok", "  "])
    assert _embed(HashingEmbedder(), []) == ([], [])


def test_make_embedder_specs():
    """None/auto pick e5-onnx without an endpoint (tests/embed/test_e5_onnx.py) and OpenAI with one; offline and
    openai take arguments."""
    bare, endpoint = EndpointSettings(), EndpointSettings(base_url="http://127.0.0.1:9/v1", embed_model="m")
    assert make_embedder(None, bare).name == make_embedder("auto", bare).name == "e5-onnx:multilingual-e5-small-int8-g2"
    assert make_embedder("offline", bare).name == "offline:hash-ngram-v1:384"
    assert make_embedder("offline:128", endpoint).name == "offline:hash-ngram-v1:128"
    assert make_embedder("offline:hash-ngram-v1:256", endpoint).name == "offline:hash-ngram-v1:256"
    assert isinstance(make_embedder("auto", endpoint), OpenAIEmbedder)
    assert make_embedder(None, endpoint).name == "openai:m"
    assert make_embedder("openai:text-embedding-3-large", endpoint).name == "openai:text-embedding-3-large"
    for spec in ("nope", "offline:big", "offline:8", "auto:x", "sentence-transformers"):
        with pytest.raises(InputError):
            make_embedder(spec, endpoint)
    with pytest.raises(JudgeError, match="needs an endpoint"):
        make_embedder("openai", bare)


def test_sentence_transformers_missing_extra_is_one_line(monkeypatch):
    """Without the optional package the spec fails with JudgeError naming the pip extra, on one line."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(JudgeError) as info:
        make_embedder("sentence-transformers:BAAI/bge-small-zh-v1.5", EndpointSettings())
    assert 'pip install -e ".[sentence-transformers]"' in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(JudgeError):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.fixture
def fake():
    with FakeOpenAI(dim=32) as server:
        yield server


def _openai(fake: FakeOpenAI, **overrides) -> OpenAIEmbedder:
    embedder = OpenAIEmbedder(fake.settings(embed_model="fake-embed", **overrides))
    embedder.backoff = (0.01, 0.05)
    return embedder


def test_openai_batches_of_at_most_256_with_one_record_each(fake):
    """600 texts go in 3 requests (256, 256, 88); vectors come back in order; one ok record per request."""
    texts = [f"text number {i} about topic {i % 7}" for i in range(600)]
    vectors, records = _embed(_openai(fake), texts)
    assert fake.embedding_calls == 3 and fake.embedding_inputs == 600
    assert sum(r.prompt_tokens for r in records) == fake.embedding_tokens
    assert [r.response for r in records] == [{"inputs": n, "dimensions": 32} for n in (256, 256, 88)]
    first = records[0]
    assert (first.kind, first.model, first.prompt_name, first.prompt_version, first.status, first.attempts) == (
        "embedding",
        "fake-embed",
        "embedding",
        None,
        "ok",
        1,
    )
    assert first.request_hash == request_hash("fake-embed", {"input": texts[:256]})
    assert len(vectors) == 600 and all(len(v) == 32 for v in vectors)
    assert vectors[300] == pytest.approx(_embed(_openai(fake), [texts[300]])[0][0])


def test_openai_retries_429_honouring_retry_after(fake):
    """Two 429s with Retry-After 0.4 s are retried after waiting that long (the backoff alone is ≤ 0.05 s);
    the record counts 3 attempts and the tokens of the reply."""
    fake.fail_next(429, n=2, retry_after=0.4, on="embeddings")
    start = time.monotonic()
    vectors, (record,) = _embed(_openai(fake), ["a question", "an answer"])
    assert time.monotonic() - start >= 0.75
    assert len(vectors) == 2 and record.ok and record.attempts == 3
    assert fake.embedding_calls == 3 and record.prompt_tokens == fake.embedding_tokens


def test_openai_failure_raises_with_the_records(fake):
    """A batch failing for good raises EmbeddingFailed (one line); every request's record rides on it."""
    fake.fail_next(500, n=3, on="embeddings")
    with pytest.raises(EmbeddingFailed) as info:
        _embed(_openai(fake, max_retries=2), ["one", "two"])
    message = str(info.value)
    assert "\n" not in message and "HTTP 500 after 3 attempts" in message
    (record,) = info.value.records
    assert (record.status, record.attempts, record.response) == ("failed", 3, None)
    assert record.error.startswith("HTTP 500 after 3 attempts")


def test_openai_final_errors_are_not_retried(fake):
    """A 401 is final on the first answer."""
    fake.fail_next(401, on="embeddings")
    with pytest.raises(EmbeddingFailed, match="HTTP 401"):
        _embed(_openai(fake), ["one"])
    assert fake.embedding_calls == 1


def test_openai_refuses_empty_text_before_any_call(fake):
    """A blank text is rejected before any request is sent."""
    with pytest.raises(ValueError, match="empty text"):
        _embed(_openai(fake), ["fine", ""])
    assert fake.embedding_calls == 0
