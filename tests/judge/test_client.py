"""JudgeClient through the real openai client against the fake OpenAI-compatible server: parsing, retries,
repair, cut-off replies, key and model checks, concurrency, rate limits and token accounting."""

from __future__ import annotations

import asyncio
import email.utils
import socket
import time

import pytest

from ragsql.errors import JudgeError
from ragsql.judge import kinds as k, prompts as p
from ragsql.judge.client import JudgeClient
from ragsql.judge.language import cjk_ratio
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import count_message_tokens
from tests.conftest import run_then_close
from tests.fake_openai import FakeOpenAI

CONTEXTS = [
    "Paris is the capital of France. The Eiffel Tower stands in Paris.",
    "France is a country in western Europe.",
]
VERIFY = k.verify.request(["Paris is the capital of France.", "Bananas grow on the Moon."], CONTEXTS)


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def _client(fake: FakeOpenAI, **overrides) -> JudgeClient:
    client = JudgeClient(fake.settings(**{"model": "judge", **overrides}))
    client.backoff = (0.01, 0.05)
    return client


def _run(client: JudgeClient, *requests: p.JudgeRequest):
    """Judge `requests` concurrently on one client, then close it."""
    return run_then_close(client, lambda c: asyncio.gather(*(c.judge(r) for r in requests)))


def _check(client: JudgeClient) -> None:
    run_then_close(client, lambda c: c.check())


def test_every_task_parses_into_its_verdict_and_record(fake):
    """All 10 prompts come back validated, with an ok record carrying hash, prompt, tokens and one attempt."""
    requests = [
        k.statements.request("Paris is the capital. It is big."),
        k.answer_analysis.request("Paris is big.", question="Paris?"),
        k.questions.request("Paris is big.", question="Paris?", n=2),
        VERIFY,
        k.classify.request("Capital?", ["Paris is the capital of France."], ["Paris is the French capital.", "x y"]),
        k.usefulness.request("Capital of France?", CONTEXTS, reference="Paris is the capital of France."),
        k.sentence_relevance.request("Capital of France?", CONTEXTS),
        k.rating.request("Capital of France?", "Paris."),
        k.critique.request("Capital?", "Paris.", ["coherence", "harmfulness"]),
        k.citations.request([("Paris is the capital of France.", CONTEXTS[:1])]),
    ]
    client = _client(fake)
    results = _run(client, *requests)
    for request, (verdict, rec) in zip(requests, results):
        assert isinstance(verdict, request.schema), request.kind
        assert rec.ok and rec.attempts == 1 and rec.error is None
        assert (rec.kind, rec.model, rec.prompt_name, rec.prompt_version) == (
            "chat",
            "judge",
            request.kind,
            request.prompt_version,
        )
        assert rec.request_hash == client.request_hash(request)
        assert rec.response == verdict.model_dump(mode="json")
        assert rec.prompt_tokens == count_message_tokens(request.messages)
    verify = results[3][0]
    assert [x.verdict for x in verify.verdicts] == ["supported", "unsupported"]
    assert sorted(e["task"] for e in fake.log) == sorted(r.kind for r in requests)
    assert fake.log[0]["max_tokens"] == 2048 and fake.chat_calls == 10


def test_tokens_recorded_equal_the_servers_counts(fake):
    """Summed over calls, and over the repair call, recorded prompt/completion tokens equal the server's."""
    fake.malformed_next(1)
    results = _run(_client(fake), VERIFY, k.rating.request("Capital?", "Paris."), k.statements.request("One. Two."))
    assert sum(r.prompt_tokens for _, r in results) == fake.prompt_tokens
    assert sum(r.completion_tokens for _, r in results) == fake.completion_tokens
    assert fake.completion_tokens > 0 and fake.chat_calls == 4


def test_chinese_question_gets_chinese_generated_questions(fake):
    """The zh prompt tells the judge to write in Chinese; the fake follows the instruction it is given."""
    request = k.answer_analysis.request("Paris is the capital of France.", question="巴黎是什么？")
    verdict, rec = _run(_client(fake), request)[0]
    assert rec.prompt_version == "answer_analysis.v1"
    assert "用中文写 3 个问题" in fake.log[0]["messages"][1]["content"]
    assert len(verdict.questions) == 3 and all(cjk_ratio(q) > 0 for q in verdict.questions)


def test_429_retry_after_is_honoured(fake):
    """A 429 with Retry-After: 1 is retried after at least one second, and the call succeeds."""
    fake.fail_next(429, retry_after=1)
    start = time.monotonic()
    verdict, rec = _run(_client(fake), VERIFY)[0]
    assert time.monotonic() - start >= 1.0
    assert rec.ok and rec.attempts == 2 and verdict is not None
    assert fake.log[1]["time"] - fake.log[0]["time"] >= 1.0


def test_retry_after_http_date_is_honoured(fake):
    """Retry-After may be an HTTP date; the client waits until then."""
    until = int(time.time()) + 3  # an HTTP date has whole seconds
    fake.fail_next(429, retry_after=email.utils.formatdate(until, usegmt=True))
    verdict, rec = _run(_client(fake), VERIFY)[0]
    assert rec.ok and rec.attempts == 2
    retried_at = fake.log[1]["time"] + (time.time() - time.monotonic())  # the fake logs monotonic time
    assert retried_at >= until - 0.05  # not before the date, however late the first attempt arrived


def test_server_errors_are_retried_then_give_one_line(fake):
    """500s are retried with backoff; when every attempt fails the record says so in one line."""
    fake.fail_next(500, n=2)
    verdict, rec = _run(_client(fake), VERIFY)[0]
    assert rec.ok and rec.attempts == 3 and verdict is not None
    fake.fail_next(503, n=10)
    verdict, rec = _run(_client(fake, max_retries=2), VERIFY)[0]
    assert verdict is None and rec.status == "failed" and rec.response is None
    assert rec.attempts == 3 and rec.error.startswith("HTTP 503 after 3 attempts: ")
    assert "\n" not in rec.error and rec.prompt_tokens == 0


def test_rate_limit_error_message_after_retries(fake):
    """Persistent 429s end as `HTTP 429 after N attempts: rate limited`."""
    fake.fail_next(429, n=10, retry_after=0)
    verdict, rec = _run(_client(fake, max_retries=4), VERIFY)[0]
    assert verdict is None and rec.error == "HTTP 429 after 5 attempts: rate limited"


def test_timeout_is_retried():
    """A request that outlives settings.timeout is abandoned and tried again."""
    with FakeOpenAI(hang=2.0) as fake:
        fake.timeout_next(1)
        start = time.monotonic()
        verdict, rec = _run(_client(fake, timeout=0.5), VERIFY)[0]
        assert rec.ok and rec.attempts == 2 and verdict is not None
        assert 0.5 <= time.monotonic() - start < 2.0 and rec.latency_ms >= 500


def test_malformed_reply_is_repaired_with_one_extra_call(fake):
    """Non-JSON content: one repair request shows the bad reply and the error, and its answer is used."""
    fake.malformed_next(1)
    verdict, rec = _run(_client(fake), VERIFY)[0]
    assert rec.ok and rec.attempts == 2 and fake.chat_calls == 2 and len(verdict.verdicts) == 2
    repair = fake.log[1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[2]["content"].startswith("Sure!")
    assert "Invalid JSON" in repair[3]["content"] and "corrected JSON" in repair[3]["content"]


def test_invalid_verdict_is_repaired_naming_the_validation_error():
    """A reply that skips a statement id fails validation; the repair message names the missing id."""
    replies = iter(
        [
            '{"verdicts": [{"id": 1, "verdict": "supported"}]}',
            '{"verdicts": [{"id": 1, "verdict": "supported"}, {"id": 2, "verdict": "矛盾"}]}',
        ]
    )
    with FakeOpenAI(responder=lambda task, messages, body: next(replies)) as fake:
        verdict, rec = _run(_client(fake), VERIFY)[0]
        assert rec.ok and [x.verdict for x in verdict.verdicts] == ["supported", "contradicted"]
        assert "missing [2]" in fake.log[1]["messages"][3]["content"]


def test_malformed_twice_fails_without_a_verdict(fake):
    """Malformed again after the repair: a failed record with the reason, no response, two attempts."""
    fake.malformed_next(2)
    verdict, rec = _run(_client(fake), VERIFY)[0]
    assert verdict is None and rec.status == "failed" and rec.response is None
    assert rec.error.startswith("invalid reply after one repair: ") and rec.attempts == 2
    assert fake.chat_calls == 2


def test_cut_off_reply_is_retried_with_twice_the_room(fake):
    """finish_reason length: not parsed, sent again with double max_tokens; twice cut off is a failure."""
    fake.truncate_next(1)
    verdict, rec = _run(_client(fake, max_tokens=300), VERIFY)[0]
    assert rec.ok and rec.attempts == 2 and [e["max_tokens"] for e in fake.log] == [300, 600]
    fake.truncate_next(2)
    verdict, rec = _run(_client(fake, max_tokens=300), VERIFY)[0]
    assert verdict is None and "cut off at max_tokens=600" in rec.error


def test_wrong_key_fails_check_and_is_not_retried():
    """401: check() raises one JudgeError line; judge() fails at once with the server's message."""
    with FakeOpenAI(required_key="right") as fake:
        with pytest.raises(JudgeError) as err:
            _check(_client(fake, api_key="wrong"))
        assert "rejected the API key" in str(err.value) and "\n" not in str(err.value)
        verdict, rec = _run(_client(fake, api_key="wrong"), VERIFY)[0]
        assert verdict is None and rec.attempts == 1 and rec.error.startswith("HTTP 401: Incorrect API key")
        _check(_client(fake, api_key="right"))


def test_unknown_model_fails_check_with_or_without_a_models_route():
    """check() names an unknown model, via /models/{id} or, when the route is missing, a one-token chat."""
    for route in (True, False):
        with FakeOpenAI(models=["judge"], models_route=route) as fake:
            _check(_client(fake, model="judge"))
            with pytest.raises(JudgeError, match="does not know the model 'gpt-9'"):
                _check(_client(fake, model="gpt-9"))
            # a 404 on /models/{id} is confirmed by a one-token chat before the model is called unknown
            assert fake.chat_calls == (1 if route else 2)


def test_unreachable_endpoint_fails_check():
    """A closed port: check() raises one JudgeError line naming the endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = JudgeClient(EndpointSettings(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=2))
    with pytest.raises(JudgeError) as err:
        _check(client)
    assert str(err.value).startswith(f"cannot reach the judge endpoint http://127.0.0.1:{port}/v1")
    assert "\n" not in str(err.value)


def test_dead_server_fails_calls_with_connection_error(fake):
    """After die_after(1) the next call works and the following ones fail as connection errors."""
    fake.die_after(1)
    results = _run(_client(fake, max_retries=1), VERIFY, VERIFY)
    assert sorted(r.status for _, r in results) == ["failed", "ok"]
    failed = next(r for _, r in results if not r.ok)
    assert failed.error.startswith("connection error after 2 attempts")


def test_concurrency_bound_is_respected():
    """No more than settings.concurrency requests are in flight at once, and the bound is reached."""
    with FakeOpenAI(latency=0.2) as fake:
        results = _run(_client(fake, concurrency=2), *[VERIFY] * 6)
        assert all(r.ok for _, r in results)
        assert fake.max_in_flight == 2


def test_rpm_limit_spaces_calls():
    """rpm=120 sends at most one request every half second. Times are arrivals at the fake server: the first
    request also opens the connection (~60 ms here), so it arrives late and the first gap looks that much shorter
    (0.436 s was measured); the later requests reuse the connection. Without the limit every gap is a few ms."""
    with FakeOpenAI() as fake:
        _run(_client(fake, rpm=120), *[VERIFY] * 4)
        times = [e["time"] for e in fake.log]
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert len(gaps) == 3 and gaps[0] >= 0.35 and min(gaps[1:]) >= 0.45, gaps


def test_fake_embeddings_are_deterministic_and_normalised(fake):
    """The fake's embeddings: same text same vector, unit length, counted per call and per input."""
    import openai

    async def go():
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k")
        try:
            a = await client.embeddings.create(model="e", input=["vector search", "vector search", "bananas"])
            b = await client.embeddings.create(model="e", input="vector search", encoding_format="float")
            return a, b
        finally:
            await client.close()

    a, b = asyncio.run(go())
    first, same, other = (d.embedding for d in a.data)
    assert first == same and first != other
    assert b.data[0].embedding == pytest.approx(first, abs=1e-6)  # float32 over base64 vs float JSON
    assert len(first) == 64 and abs(sum(x * x for x in first) - 1) < 1e-6
    assert (fake.embedding_calls, fake.embedding_inputs) == (2, 4)


def test_validation_uses_the_request_context():
    """A verdict model checks ids against what the prompt numbered (the client relies on this for repair)."""
    with pytest.raises(ValueError, match="missing"):
        k.verify.StatementVerdicts.model_validate(
            {"verdicts": [{"id": 1, "verdict": "supported"}]}, context=VERIFY.context
        )
