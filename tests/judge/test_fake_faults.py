"""The test fake's rate-based fault mix: deterministic by seed, per request body, whatever the order."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.fake_openai import FakeOpenAI, parse_fault_mix


def _post(url: str, payload: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _chat(i: int) -> dict:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Task: statements"},
            {"role": "user", "content": f"<text>\nSentence {i}.\n</text>"},
        ],
    }


def _outcomes(fake: FakeOpenAI, order: list[int]) -> dict[int, tuple[int, str]]:
    out = {}
    for i in order:
        status, body = _post(fake.base_url + "/chat/completions", _chat(i))
        out[i] = (
            status,
            body if status != 200 or not body.startswith("{") else json.loads(body)["choices"][0]["message"]["content"],
        )
    return out


def test_fault_mix_is_deterministic_by_seed_and_independent_of_order():
    """The same seed gives the same request the same fault in any order; the shares are about those asked."""
    mix = {"429": 0.2, "500": 0.2, "prose": 0.2, "wrong_shape": 0.1, "non_json_body": 0.1}
    runs = []
    for order in (list(range(300)), list(reversed(range(300)))):
        with FakeOpenAI() as fake:
            fake.fault_mix(mix, seed=11)
            runs.append(_outcomes(fake, order))
            faults = fake.stats()["faults"]
    assert runs[0] == runs[1]
    assert set(faults) == set(mix)
    assert 0.6 * 300 <= sum(faults.values()) <= 0.95 * 300
    statuses = [s for s, _ in runs[0].values()]
    assert statuses.count(429) > 30 and statuses.count(500) > 30
    with FakeOpenAI() as fake:
        fake.fault_mix(mix, seed=12)
        assert _outcomes(fake, list(range(300))) != runs[0]


def test_a_retry_draws_again_and_a_full_share_is_a_storm():
    """A request sent again draws a new fault (transient); share 1.0 fails every attempt; None clears it."""
    with FakeOpenAI() as fake:
        fake.fault_mix({"503": 0.5}, seed=1)
        seen = {_post(fake.base_url + "/chat/completions", _chat(1))[0] for _ in range(20)}
        assert seen == {200, 503}
        fake.fault_mix({"503": 1.0})
        assert {_post(fake.base_url + "/chat/completions", _chat(2))[0] for _ in range(5)} == {503}
        fake.fault_mix(None)
        assert _post(fake.base_url + "/chat/completions", _chat(2))[0] == 200


def test_admin_route_sets_the_mix_and_parse_rejects_nonsense():
    """POST /admin/fault_mix changes the mix of a running server; bad kinds and shares are refused."""
    with FakeOpenAI() as fake:
        admin = fake.base_url.removesuffix("/v1") + "/admin/fault_mix"
        assert _post(admin, {"mix": {"429": 1.0}, "retry_after": 0.01})[0] == 200
        status, _ = _post(fake.base_url + "/chat/completions", _chat(3))
        assert status == 429
        assert _post(admin, {"mix": {"teapot": 0.5}})[0] == 400
        assert _post(admin, {"mix": None})[0] == 200
        assert _post(fake.base_url + "/chat/completions", _chat(3))[0] == 200
        assert fake.stats()["repeated_good_replies"] == 0
        assert _post(fake.base_url + "/chat/completions", _chat(3))[0] == 200
        assert fake.stats()["repeated_good_replies"] == 1
    assert parse_fault_mix("prose=0.1, 429=0.05") == {"prose": 0.1, "429": 0.05}
    assert parse_fault_mix('{"timeout": 0.5}') == {"timeout": 0.5}
    for bad in ("prose=2", "prose=0.6,500=0.6", "nope=0.1", "prose"):
        with pytest.raises(ValueError):
            parse_fault_mix(bad)
