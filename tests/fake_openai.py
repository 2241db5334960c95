"""A small OpenAI-compatible HTTP server for tests and the benchmark: deterministic judge replies, hashed
bag-of-words embeddings, token counters and fault injection (429/5xx/401, timeouts, malformed or cut-off
replies, a server that dies).

    with FakeOpenAI(latency=0.01) as fake:
        client = AsyncOpenAI(base_url=fake.base_url, api_key="k")
        ...
        assert fake.chat_calls == 6

The default responder reads the ``Task: <name>`` marker on the first line of the system message and the
tagged user message that ``ragsql.judge.prompts`` builds, and answers every one of the 16 judge tasks with
valid JSON, and ``generate`` with the first sentence of the first context and its citation. ``responder=``
replaces it: ``(task, messages, request_json) -> content``.

Faults come two ways. Queued ones hit the next requests in order: ``fail_next``, ``timeout_next``,
``malformed_next``, ``truncate_next``, ``die_after``. A rate-based mix hits a share of all requests::

    fake.fault_mix({"prose": 0.1, "429": 0.05, "500": 0.05, "timeout": 0.02, "non_json_body": 0.01}, seed=7)

Each request to the route (``on=``: 'chat' by default, 'embeddings', 'rerank' or 'any') draws one fault, or
none, from sha256(seed, route, request body, how many times this same body was received before): the same
seed gives the same faults to the same requests whatever order concurrent clients send them in, and a retry
of a request draws again (so a 5% fault is transient, a 100% one is a storm). The kinds (``FAULT_KINDS``):

- ``prose``: 200, a well-formed chat completion whose content is prose, not JSON (a model ignoring
  ``response_format``);
- ``wrong_shape``: 200, the content is JSON but not the shape the task asked for;
- ``truncated``: 200, the content cut in half with finish_reason 'length';
- ``non_json_body``: 200 with an HTML body that is not JSON at HTTP level (a proxy, a wrong base URL);
- ``timeout``: the request hangs ``hang`` seconds, then its connection is closed with no answer;
- ``drop``: the connection is closed at once with no answer;
- an HTTP status such as ``"429"``, ``"500"``, ``"503"``: that status with an OpenAI-style error body; 429
  carries ``Retry-After: <retry_after>`` seconds (``fault_mix(..., retry_after=0.05)``).

``fault_mix(None)`` clears the mix. ``stats()`` (and ``GET /admin/stats``) counts the faults given
(``faults``), the distinct chat request bodies (``unique_chat_requests``) and ``repeated_good_replies``: good
replies sent for a chat body that had already been given a good reply (a stored reply bought twice).
``python -m tests.fake_openai --fault-mix 'prose=0.1,429=0.05' --fault-seed 7`` serves with a mix (and
``--die-after N`` dies after N chat calls), and
``POST /admin/fault_mix`` with ``{"mix": {...} | null, "seed": 7, "on": "chat", "retry_after": 0.05}``
changes it in a running server (e.g. for a clean re-run).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragsql.judge.language import split_sentences
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import count_message_tokens, count_tokens

__all__ = ["FAULT_KINDS", "FakeOpenAI", "default_responder", "hashed_embedding", "parse_fault_mix"]

Responder = Callable[[str, list[dict[str, Any]], dict[str, Any]], str]

_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_STOP = {
    "the",
    "a",
    "an",
    "of",
    "and",
    "or",
    "to",
    "in",
    "is",
    "are",
    "was",
    "were",
    "it",
    "its",
    "for",
    "on",
    "with",
    "as",
    "by",
    "that",
    "this",
    "be",
    "at",
    "from",
    "what",
    "how",
    "which",
    "does",
    "do",
    "lt",
}
_EN_FORMS = ("What is true about {}?", "Can you explain that {}?", "Is it the case that {}?")
_ZH_FORMS = ("关于“{}”，是什么情况？", "请解释：{}？", "是否{}？")
FAULT_KINDS = ("prose", "wrong_shape", "truncated", "non_json_body", "timeout", "drop")
"""Fault kinds of `FakeOpenAI.fault_mix` besides an HTTP status given as its number ("429", "500", ...)."""
_PROSE = "Sure! Having read the contexts carefully, I think the statements are mostly supported."
_WRONG_SHAPE = '{"result": "supported", "score": "high"}'
_NONCOMMITTAL = ("i don't know", "i do not know", "no information", "不知道", "没有相关信息", "无法回答")


def _terms(text: str) -> list[str]:
    """Content words (lower case, stop words dropped) and CJK character bigrams."""
    out: list[str] = []
    for tok in _WORD.findall(text.lower()):
        if "\u3400" <= tok[0] <= "\u9fff":
            out.extend([tok[i : i + 2] for i in range(len(tok) - 1)] or [tok])
        elif tok not in _STOP:
            out.append(tok)
    return out


def _covered(text: str, pool: Iterable[str], share: float = 0.6) -> bool:
    """True when at least `share` of the terms of `text` appear in `pool`."""
    terms, have = _terms(text), set(pool)
    return bool(terms) and sum(t in have for t in terms) / len(terms) >= share


def _between(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
    return match.group(1) if match else ""


def _numbered(block: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^(\d+)\. (.*)$", block, re.M)]


def _contexts(text: str) -> list[tuple[int, str]]:
    return [(int(i), c) for i, c in re.findall(r'<context id="(\d+)">\n(.*?)\n</context>', text, re.S)]


def _synthesized(user: str) -> dict[str, Any]:
    """A question on the first sentence of each passage the kind needs (two for multi and comparison), quoting
    it exactly; the answer is that sentence's last word."""
    kind = re.search(r"^(?:Kind|类型)[:：] ?(\w+)", user, re.M)
    contexts = re.findall(r'<context id="([^"]+)">\n(.*?)\n</context>', user, re.S)
    needed = contexts[: 2 if kind and kind.group(1) in ("multi", "comparison") else 1]
    quotes = [(cid, (split_sentences(text) or [text])[0]) for cid, text in needed]
    words = quotes[0][1].rstrip("。.!?！？").split()
    return {
        "question": f"What is said about {' '.join(words[:6])}?",
        "answer": words[-1] if words else "?",
        "evidence": [{"id": cid, "quote": quote} for cid, quote in quotes],
    }


def _generated(user: str) -> dict[str, Any]:
    """The first sentence of the first context, cited by its id before the end punctuation."""
    contexts = re.findall(r'<context id="([^"]+)">\n(.*?)\n</context>', user, re.S)
    sentences = split_sentences(contexts[0][1]) if contexts else []
    if not sentences:
        return {"answer": "I don't know based on the retrieved context.", "citations": []}
    cid, first = contexts[0][0], sentences[0]
    core, end = re.match(r"(.*?)([。！？.!?]*)$", first, re.S).groups()
    chinese = re.search(r"[\u3400-\u9fff]", first) is not None
    return {"answer": f"{core}{'' if chinese else ' '}[{cid}]{end or ('。' if chinese else '.')}", "citations": [cid]}


def _questions(answer: str, head: str) -> dict[str, Any]:
    match = re.search(r"(\d+)", head)
    n = int(match.group(1)) if match else 3
    chinese = "Chinese" in head or "中文" in head
    sentences = split_sentences(answer) or [answer]
    forms = _ZH_FORMS if chinese else _EN_FORMS
    qs = [forms[i % len(forms)].format(sentences[i % len(sentences)].rstrip("。.!?！？")) for i in range(n)]
    return {"questions": qs, "noncommittal": any(p in answer.lower() for p in _NONCOMMITTAL)}


def default_responder(task: str, messages: list[dict[str, Any]], request_json: dict[str, Any]) -> str:
    """A valid JSON reply for each judge task, built from the words of the prompt's tagged data."""
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    reply: dict[str, Any]
    if task == "statements":
        reply = {"statements": split_sentences(_between(user, "text"))}
    elif task in ("answer_analysis", "questions"):
        head, _, _ = user.partition("<answer>")
        answer = _between(user, "answer")
        reply = _questions(answer, head)
        if task == "answer_analysis":
            reply["statements"] = split_sentences(answer)
    elif task == "verify":
        pool = _terms(_between(user, "contexts"))
        reply = {
            "verdicts": [
                {"id": i, "verdict": "supported" if _covered(s, pool) else "unsupported", "reason": "fake"}
                for i, s in _numbered(_between(user, "statements"))
            ]
        }
    elif task == "classify":
        answer, reference = (
            _numbered(_between(user, "answer_statements")),
            _numbered(_between(user, "reference_statements")),
        )
        a_pool, r_pool = _terms(" ".join(s for _, s in answer)), _terms(" ".join(s for _, s in reference))
        reply = {
            "answer": [{"id": i, "label": "TP" if _covered(s, r_pool, 0.5) else "FP"} for i, s in answer],
            "reference": [{"id": i, "label": "TP" if _covered(s, a_pool, 0.5) else "FN"} for i, s in reference],
        }
    elif task == "usefulness":
        target = set(_terms(_between(user, "reference") or _between(user, "answer")))
        reply = {
            "verdicts": [
                {"id": i, "useful": len(target & set(_terms(c))) >= 2, "reason": "fake"} for i, c in _contexts(user)
            ]
        }
    elif task == "sentence_relevance":
        question = set(_terms(_between(user, "question")))
        reply = {"relevant": [i for i, s in _numbered(_between(user, "sentences")) if question & set(_terms(s))]}
    elif task == "rating":
        q_terms, a_terms = _terms(_between(user, "question")), set(_terms(_between(user, "answer")))
        share = sum(t in a_terms for t in q_terms) / len(q_terms) if q_terms else 0.0
        reply = {"score": 1 + round(4 * share), "reason": "fake"}
    elif task == "critique":
        names = re.findall(r"^- ([^:\n]+): ", user.partition("<question>")[0], re.M)
        reply = {
            "verdicts": [
                {"aspect": n, "verdict": n not in ("harmfulness", "maliciousness"), "reason": "fake"} for n in names
            ]
        }
    elif task == "citations":
        claims = re.findall(r'<claim id="(\d+)">\n<sentence>(.*?)</sentence>\n(.*?)</claim>', user, re.S)
        reply = {
            "verdicts": [
                {
                    "id": int(i),
                    "supported": _covered(s, _terms(" ".join(re.findall(r"<cited>\n(.*?)\n</cited>", cited, re.S)))),
                    "reason": "fake",
                }
                for i, s, cited in claims
            ]
        }
    elif task == "entities":  # capitalised words and numbers; CJK runs of two or more characters
        text = _between(user, "text")
        reply = {"entities": list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b|\d+|[\u3400-\u9fff]{2,}", text)))}
    elif task == "claims":
        reply = {"claims": split_sentences(_between(user, "text"))}
    elif task == "attribution":
        contexts = _contexts(user)
        reply = {
            "verdicts": [
                {"id": i, "contexts": [ci for ci, c in contexts if _covered(s, _terms(c))]}
                for i, s in _numbered(_between(user, "statements"))
            ]
        }
    elif task in ("groundedness", "context_rating"):  # the share of the answer's (question's) terms in the contexts
        pool = set(_terms(_between(user, "contexts")))
        terms = _terms(_between(user, "answer" if task == "groundedness" else "question"))
        share = sum(t in pool for t in terms) / len(terms) if terms else 0.0
        reply = {"rating": 2 if share >= 0.6 else 1 if share >= 0.3 else 0}
    elif task == "rubric":  # the share of the question's terms in the answer, as for rating
        q_terms, a_terms = _terms(_between(user, "question")), set(_terms(_between(user, "answer")))
        share = sum(t in a_terms for t in q_terms) / len(q_terms) if q_terms else 0.0
        reply = {"score": 1 + round(4 * share), "reason": "fake"}
    elif '{"verdict": true' in messages[0].get("content", ""):  # a yes/no metric of the registry: yes when the
        q_terms, a_terms = _terms(_between(user, "question")), set(_terms(_between(user, "answer")))  # answer
        reply = {"verdict": any(t in a_terms for t in q_terms), "reason": "fake"}  # shares a word of the question
    elif task == "generate":
        reply = _generated(user)
    elif task == "synthesize":
        reply = _synthesized(user)
    else:
        reply = {}
    return json.dumps(reply, ensure_ascii=False)


def hashed_embedding(text: str, dim: int) -> list[float]:
    """Deterministic signed hashed bag of words, L2-normalised (a text with no word gets the first axis)."""
    vec = [0.0] * dim
    for term in _terms(text):
        h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0:
        return [1.0] + [0.0] * (dim - 1)
    return [x / norm for x in vec]


def _task(messages: list[dict[str, Any]]) -> str:
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    match = re.match(r"Task:\s*(\w+)", system)
    return match.group(1) if match else ""


STAT_NAMES = (
    "chat_calls",
    "embedding_calls",
    "rerank_calls",
    "embedding_inputs",
    "prompt_tokens",
    "completion_tokens",
    "embedding_tokens",
    "max_in_flight",
)


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a retry after a timeout, a closed pool) is normal here: no traceback on stderr,
    where it would land in the output of the command under test."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """OpenAI-compatible server on 127.0.0.1 (port 0) with counters and fault injection; a context manager."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        dim: int = 64,
        required_key: str | None = None,
        models: Iterable[str] | None = None,
        models_route: bool = True,
        hang: float = 5.0,
        responder: Responder | None = None,
    ):
        self.latency = latency
        self.dim = dim
        self.required_key = required_key
        self.models = None if models is None else set(models)
        self.models_route = models_route
        self.hang = hang
        self.responder: Responder = responder or default_responder
        count_tokens("warm up")  # the tokenizer loads (~1 s) here, not while a client waits for its first reply
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.reset()

    def settings(self, **overrides: Any) -> EndpointSettings:
        """Client settings for this server: key "k", 3 retries, a 5 s timeout, then `overrides`."""
        return EndpointSettings(
            **{"base_url": self.base_url, "api_key": "k", "max_retries": 3, "timeout": 5.0, **overrides}
        )

    # -- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Listen on a free port of 127.0.0.1 in a background thread."""
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- counters and faults ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Zero every counter, forget the log and clear every pending fault."""
        with self._lock:
            self.chat_calls = self.embedding_calls = self.embedding_inputs = self.rerank_calls = 0
            self.prompt_tokens = self.completion_tokens = self.embedding_tokens = 0
            self.in_flight = self.max_in_flight = 0
            self.log: list[dict[str, Any]] = []
            self._failures: list[tuple[str, int, float | None, Any]] = []
            self._timeouts = self._malformed = self._truncated = 0
            self._alive_for: int | None = None
            self._dead_status: int | None = None
            self._mix: tuple[dict[str, float], int, str, float] | None = None
            self._seen: dict[str, int] = {}  # (route, body digest) -> times received, for the mix's draws
            self._seen_chat: set[str] = set()
            self._good_chat: set[str] = set()
            self.repeated_good_replies = 0
            self.faults: dict[str, int] = {}

    def stats(self) -> dict[str, Any]:
        """The counters, as ``GET /admin/stats`` serves them to a driver in another process."""
        with self._lock:
            out: dict[str, Any] = {name: getattr(self, name) for name in STAT_NAMES}
            out["unique_chat_requests"] = len(self._seen_chat)
            out["repeated_good_replies"] = self.repeated_good_replies
            out["faults"] = dict(self.faults)
            return out

    def fault_mix(
        self, mix: dict[str, float] | None, *, seed: int = 0, on: str = "chat", retry_after: float = 0.05
    ) -> None:
        """Give a share of the requests to `on` a fault (see the module docstring); None clears the mix.

        `mix` maps a fault kind (`FAULT_KINDS`) or an HTTP status ("429", "500") to the share of requests that
        get it; shares are at least 0 and sum to at most 1. Deterministic by `seed` for a given request."""
        checked = _check_mix(mix) if mix else None
        if on not in ("chat", "embeddings", "rerank", "any"):
            raise ValueError(f"on must be chat, embeddings, rerank or any, got {on!r}")
        with self._lock:
            self._mix = None if checked is None else (checked, int(seed), on, float(retry_after))

    def fail_next(
        self, status: int, n: int = 1, retry_after: float | str | None = None, body: Any = None, on: str = "chat"
    ) -> None:
        """The next `n` requests to `on` ('chat', 'embeddings' or 'any') get HTTP `status` (queued in order)."""
        with self._lock:
            self._failures.extend([(on, status, retry_after, body)] * n)

    def timeout_next(self, n: int = 1) -> None:
        """The next `n` chat requests hang for ``hang`` seconds and are then dropped without an answer."""
        with self._lock:
            self._timeouts = n

    def malformed_next(self, n: int = 1) -> None:
        """The next `n` chat replies are not JSON (0 clears)."""
        with self._lock:
            self._malformed = n

    def truncate_next(self, n: int = 1) -> None:
        """The next `n` chat replies are cut in half with finish_reason 'length'."""
        with self._lock:
            self._truncated = n

    def die_after(self, n: int | None, status: int | None = None) -> None:
        """After `n` more chat calls every request has its connection closed (or gets `status`); None revives."""
        with self._lock:
            self._alive_for, self._dead_status = n, status

    # -- request handling (called from the server threads) ---------------------------------------------------
    def _take(self, attr: str) -> bool:
        with self._lock:
            left = getattr(self, attr)
            if left > 0:
                setattr(self, attr, left - 1)
            return left > 0

    def _pending_failure(self, route: str) -> tuple[int, float | str | None, Any] | None:
        with self._lock:
            for i, (on, status, retry_after, body) in enumerate(self._failures):
                if on in (route, "any"):
                    del self._failures[i]
                    return status, retry_after, body
        return None

    def _draw(self, route: str, body: bytes) -> tuple[str | None, float]:
        """The mix's fault for this request (or None) and the Retry-After of a 429; counts the body."""
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            key = f"{route}:{digest}"
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
            if route == "chat":
                self._seen_chat.add(digest)
            if self._mix is None:
                return None, 0.0
            mix, seed, on, retry_after = self._mix
            if on not in (route, "any"):
                return None, retry_after
            point = int.from_bytes(hashlib.sha256(f"{seed}:{key}:{n}".encode()).digest()[:8], "big") / 2**64
            total = 0.0
            for kind in sorted(mix):
                total += mix[kind]
                if point < total:
                    self.faults[kind] = self.faults.get(kind, 0) + 1
                    return kind, retry_after
            return None, retry_after

    def _good_reply(self, body: bytes) -> None:
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            if digest in self._good_chat:
                self.repeated_good_replies += 1
            self._good_chat.add(digest)

    def _dead(self, route: str) -> bool:
        with self._lock:
            if self._alive_for is None:
                return False
            if route == "chat" and self._alive_for > 0:
                self._alive_for -= 1
                return False
            return self._alive_for <= 0


def _check_mix(mix: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, share in mix.items():
        kind = str(kind).strip()
        if kind not in FAULT_KINDS and not (kind.isdigit() and 400 <= int(kind) <= 599):
            raise ValueError(f"unknown fault {kind!r}: use an HTTP status 400-599 or one of {', '.join(FAULT_KINDS)}")
        if not 0 <= float(share) <= 1:
            raise ValueError(f"the share of {kind!r} must be within 0..1, got {share}")
        out[kind] = float(share)
    if sum(out.values()) > 1 + 1e-9:
        raise ValueError(f"the shares sum to {sum(out.values()):.3f}, more than 1")
    return out


def parse_fault_mix(text: str) -> dict[str, float]:
    """``prose=0.1,429=0.05`` or the JSON object ``{"prose": 0.1, "429": 0.05}`` as a checked mix."""
    text = text.strip()
    if text.startswith("{"):
        raw = json.loads(text)
    else:
        raw = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            kind, sep, share = part.partition("=")
            if not sep:
                raise ValueError(f"expected KIND=SHARE, got {part!r}")
            raw[kind.strip()] = float(share)
    return _check_mix(raw)


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        self.close_connection = True

    def _route(self) -> str:
        path = self.path.split("?")[0].rstrip("/")
        routes = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings", "/v1/rerank": "rerank"}
        return routes.get(path, path)

    def _gate(self, route: str) -> bool:
        """Apply death, the key check and queued failures; True when the request was already answered."""
        fake = self.server_fake
        if fake._dead(route):
            if fake._dead_status is None:
                self._drop()
            else:
                self._send(fake._dead_status, _error("server is down", "server_error"))
            return True
        if fake.required_key and self.headers.get("Authorization") != f"Bearer {fake.required_key}":
            self._send(401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
            return True
        failure = fake._pending_failure(route)
        if failure is not None:
            status, retry_after, body = failure
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            message = {429: "rate limited", 401: "Incorrect API key provided."}.get(status, f"fake error {status}")
            self._send(status, body if body is not None else _error(message, "fake_error"), headers)
            return True
        return False

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        fake = self.server_fake
        path = self.path.split("?")[0].rstrip("/")
        if path == "/admin/stats":
            self._send(200, fake.stats())
            return
        if not fake.models_route or not path.startswith("/v1/models"):
            self._send(404, _error(f"no route {path}", "invalid_request_error"))
            return
        if self._gate("models"):
            return
        known = sorted(fake.models) if fake.models is not None else ["fake-judge", "fake-embed"]
        if path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in known],
                },
            )
            return
        model = path.removeprefix("/v1/models/")
        if fake.models is not None and model not in fake.models:
            self._send(404, _error(f"The model '{model}' does not exist", "invalid_request_error", "model_not_found"))
            return
        self._send(200, {"id": model, "object": "model", "created": 0, "owned_by": "fake"})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        fake = self.server_fake
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/admin/reset":
            fake.reset()
            self._send(200, fake.stats())
            return
        if self.path.rstrip("/") == "/admin/fault_mix":
            try:
                spec = json.loads(body or b"{}")
                fake.fault_mix(
                    spec.get("mix"),
                    seed=int(spec.get("seed", 0)),
                    on=spec.get("on", "chat"),
                    retry_after=float(spec.get("retry_after", 0.05)),
                )
            except (ValueError, TypeError, AttributeError) as exc:
                self._send(400, _error(str(exc), "invalid_request_error"))
                return
            self._send(200, fake.stats())
            return
        route = self._route()
        if route not in ("chat", "embeddings", "rerank"):
            self._send(404, _error(f"no route {self.path}", "invalid_request_error"))
            return
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            self._send(400, _error("body is not JSON", "invalid_request_error"))
            return
        with fake._lock:
            if route == "chat":
                fake.chat_calls += 1
            elif route == "rerank":
                fake.rerank_calls += 1
            else:
                fake.embedding_calls += 1
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            if route == "chat":
                messages = request.get("messages") or []
                fake.log.append(
                    {
                        "time": time.monotonic(),
                        "task": _task(messages),
                        "messages": messages,
                        "model": request.get("model"),
                        "max_tokens": request.get("max_tokens"),
                    }
                )
        try:
            if self._gate(route):
                return
            fault, retry_after = fake._draw(route, body)
            if fault is not None and self._fault(fault, retry_after, route):
                return
            model = request.get("model")
            if fake.models is not None and model not in fake.models:
                self._send(
                    404, _error(f"The model '{model}' does not exist", "invalid_request_error", "model_not_found")
                )
                return
            if route == "chat" and fake._take("_timeouts"):
                time.sleep(fake.hang)
                self._drop()
                return
            if fake.latency:
                time.sleep(fake.latency)
            if route == "chat":
                self._chat(request, fault, body)
            elif route == "rerank":
                self._rerank(request)
            else:
                self._embeddings(request)
        except (BrokenPipeError, ConnectionResetError):
            self._drop()
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _fault(self, fault: str, retry_after: float, route: str) -> bool:
        """Answer with the drawn fault; False for the faults that shape a chat reply's content instead."""
        fake = self.server_fake
        if fault.isdigit():
            status = int(fault)
            headers = {"Retry-After": f"{retry_after:g}"} if status == 429 else {}
            message = "rate limited" if status == 429 else f"fake fault {status}"
            self._send(status, _error(message, "fake_error"), headers)
        elif fault == "timeout":
            time.sleep(fake.hang)
            self._drop()
        elif fault == "drop":
            self._drop()
        elif fault == "non_json_body":
            data = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif route == "chat":
            return False  # prose / wrong_shape / truncated: `_chat` spoils the reply's content
        else:  # the same faults elsewhere: a 200 JSON body of the wrong shape
            self._send(200, {"object": "list", "message": _PROSE})
        return True

    def _chat(self, request: dict[str, Any], fault: str | None = None, body: bytes = b"") -> None:
        fake = self.server_fake
        messages = request.get("messages") or []
        content = fake.responder(_task(messages), messages, request)
        finish = "stop"
        if fault == "prose" or fake._take("_malformed"):
            content = _PROSE if fault == "prose" else "Sure! Here is my verdict: supported (not JSON)"
        elif fault == "wrong_shape":
            content = _WRONG_SHAPE
        elif fault == "truncated" or fake._take("_truncated"):
            content, finish = content[: max(1, len(content) // 2)], "length"
        else:
            fake._good_reply(body)
        prompt, completion = count_message_tokens(messages), count_tokens(content)
        with fake._lock:
            fake.prompt_tokens += prompt
            fake.completion_tokens += completion
        self._send(
            200,
            {
                "id": f"chatcmpl-fake-{fake.chat_calls}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": finish,
                        "logprobs": None,
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        )

    def _rerank(self, request: dict[str, Any]) -> None:
        """Cohere/Jina-style rerank: relevance = share of the query's words (CJK: characters) in the document."""
        query, documents = str(request.get("query") or ""), [str(d) for d in request.get("documents") or []]
        words = set(re.findall(r"[a-z0-9]+|[\u4e00-\u9fff]", query.lower()))
        scores = [
            len(words & set(re.findall(r"[a-z0-9]+|[\u4e00-\u9fff]", d.lower()))) / max(1, len(words))
            for d in documents
        ]
        top_n = int(request.get("top_n") or len(documents))
        order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))[:top_n]
        self._send(
            200,
            {
                "id": "rerank-fake",
                "model": request.get("model"),
                "results": [{"index": i, "relevance_score": scores[i]} for i in order],
            },
        )

    def _embeddings(self, request: dict[str, Any]) -> None:
        fake = self.server_fake
        raw = request.get("input")
        inputs = [raw] if isinstance(raw, str) else [str(x) for x in (raw or [])]
        dim = int(request.get("dimensions") or fake.dim)
        tokens = sum(count_tokens(t) for t in inputs)
        with fake._lock:
            fake.embedding_inputs += len(inputs)
            fake.embedding_tokens += tokens
        data = []
        for i, text in enumerate(inputs):
            vec = hashed_embedding(text, dim)
            if request.get("encoding_format") == "base64":
                data.append(
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode(),
                    }
                )
            else:
                data.append({"object": "embedding", "index": i, "embedding": vec})
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


def _serve() -> None:
    """``python -m tests.fake_openai [--latency S] [--fault-mix MIX]``: serve here, print the base URL, stop on EOF.

    The benchmark runs the server this way so that its work does not share the client's interpreter (RAGAS's
    figures were measured against a server in its own process too).
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=_serve.__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every chat and embedding call sleeps")
    parser.add_argument("--dim", type=int, default=64, help="embedding dimension")
    parser.add_argument(
        "--fault-mix",
        type=parse_fault_mix,
        default=None,
        metavar="MIX",
        help="share of requests per fault: 'prose=0.1,429=0.05,500=0.05,timeout=0.02' or JSON; "
        f"kinds: an HTTP status or {', '.join(FAULT_KINDS)}",
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument(
        "--fault-on",
        default="chat",
        choices=("chat", "embeddings", "rerank", "any"),
        help="which requests the mix hits",
    )
    parser.add_argument("--retry-after", type=float, default=0.05, help="Retry-After seconds of a 429 fault")
    parser.add_argument("--hang", type=float, default=5.0, help="seconds a timeout fault hangs")
    parser.add_argument(
        "--die-after",
        type=int,
        default=None,
        metavar="N",
        help="after N chat calls every request has its connection closed",
    )
    args = parser.parse_args()
    with FakeOpenAI(latency=args.latency, dim=args.dim, hang=args.hang) as fake:
        if args.fault_mix:
            fake.fault_mix(args.fault_mix, seed=args.fault_seed, on=args.fault_on, retry_after=args.retry_after)
        if args.die_after is not None:
            fake.die_after(args.die_after)
        print(fake.base_url, flush=True)
        sys.stdin.read()  # until the driver closes our stdin (or exits)


if __name__ == "__main__":
    _serve()
