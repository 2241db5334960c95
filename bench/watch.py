"""Bench of `ragsql watch`: rows arriving in a log table, judged by a cron-like loop, through a SIGKILL and a restart.

    python bench/watch.py [--rows-per-minute 1000] [--minutes 10] [--sample 0.1 1.0] [--latency-ms 200]
                          [--workers 8] [--processes 2] [--interval 3] [--home DIR] [--keep DIR] [--json]

For each sampling fraction in turn, in a scratch embedded PostgreSQL of its own (`--home`, default a temporary
directory, started with track_commit_timestamp on), a fresh log table `app.log_<percent>` and a watch of it
(faithfulness, judged by the test fake tests/fake_openai.py in its own process, `latency-ms` per call):

- a writer process commits `rows-per-minute` rows a minute for `minutes`, one row a transaction, except a share
  (`--late`, 5%) written into transactions held open 5 to 20 s (they began before rows already captured and commit
  after them: the late commits a watch must still capture once);
- a cron-like loop starts `python -m ragsql watch run NAME --once --workers W` every `interval` seconds while fewer
  than `processes` such processes run (W = workers / processes, so `workers` in all);
- at 40% of the writing time the oldest running watcher is SIGKILLed; at 60% PostgreSQL is restarted (pg_ctl
  restart -m fast: every session is cut, the writer's and the watchers' too, and they reconnect or exit);
- after the writer stops, the loop runs on until every sampled row has a verdict (or `--drain` seconds pass).

It reports, from the database and from every request the fake received:

- rows committed and their rate; sampled rows (ragsql.watch_sample_point(key) < fraction) and those judged;
- rows judged per second, sustained (judged rows / seconds from the first commit to the last verdict);
- the lag from a row's commit (pg_xact_commit_timestamp of its xmin) to its verdict (the judge task's updated_at
  when it was closed done): p50, p95, max;
- calls bought twice: chat requests answered with a valid reply more than once by the fake (those bought before
  the SIGKILL or the restart and again after it are replies a process had received but not yet stored when it
  died or lost its database; the others' goal is 0), requests sent after their reply was stored (goal 0), and
  judge_call rows of one request hash stored ok twice (goal 0);
- rows lost: sampled rows of the source with no done verdict after the drain (goal 0); watchers' exit statuses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.soak import FakeProcess, Server, make_records  # noqa: E402

__all__ = ["Config", "Phase", "main", "run_bench"]

DATABASE = "ragsql_watch_bench"
METRIC = "faithfulness"


@dataclass
class Config:
    """What one bench does."""

    rows_per_minute: int = 1000
    minutes: float = 10.0
    samples: tuple[float, ...] = (0.1, 1.0)
    latency: float = 0.2
    workers: int = 8
    processes: int = 2
    interval: float = 3.0
    late: float = 0.05
    drain: float = 600.0
    kill_at: float = 0.4
    restart_at: float = 0.6
    seed: int = 7
    home: Path | None = None
    keep: Path | None = None


@dataclass
class Phase:
    """The measures of one sampling fraction."""

    sample: float
    committed: int = 0
    write_seconds: float = 0.0
    late_rows: int = 0
    sampled: int = 0
    judged: int = 0
    lost: int = 0
    span_seconds: float = 0.0
    drain_seconds: float = 0.0
    lag: dict[str, float] = field(default_factory=dict)
    chat: dict[str, int] = field(default_factory=dict)
    stored_twice: int = 0
    watchers: int = 0
    watcher_seconds: list[float] = field(default_factory=list)  # how long each watch run process took
    exits: dict[str, int] = field(default_factory=dict)
    tracebacks: int = 0
    events: list[str] = field(default_factory=list)
    marks: list[float] = field(default_factory=list)  # wall times of the kill and the restart


# -- the writer -----------------------------------------------------------------------------------------------

INSERT = "insert into app.{table} (question, answer, contexts) values (%s, %s, %s::jsonb)"


def _connect(url: str, autocommit: bool) -> psycopg.Connection:
    """A connection, retried while the server restarts (up to a minute)."""
    for _ in range(120):
        try:
            return psycopg.connect(url, autocommit=autocommit, connect_timeout=5)
        except psycopg.OperationalError:
            time.sleep(0.5)
    return psycopg.connect(url, autocommit=autocommit, connect_timeout=5)


def write(url: str, table: str, rows: int, seconds: float, late: float, seed: int, out: str) -> None:
    """Commit `rows` rows over `seconds`, one per transaction but a share `late` in transactions held 5-20 s;
    a row whose transaction is cut by a restart is written again. Writes {"late": n} to `out` at the end."""
    rng = random.Random(seed)
    records = make_records(rows, seed)
    sql = INSERT.format(table=table)
    conn = _connect(url, autocommit=True)
    held: psycopg.Connection | None = None
    held_rows: list[dict] = []
    held_until = 0.0
    late_rows = 0
    start = time.monotonic()

    def insert(c: psycopg.Connection, rec: dict) -> None:
        c.execute(sql, (rec["question"], rec["response"], json.dumps(rec["retrieved_contexts"])))

    i = 0
    while i < rows:
        due = start + seconds * i / rows
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        rec = records[i]
        try:
            if held is not None and time.monotonic() >= held_until:
                held.commit()
                late_rows += len(held_rows)
                held.close()
                held, held_rows = None, []
            if rng.random() < late:
                if held is None:
                    held = _connect(url, autocommit=False)
                    held_until = time.monotonic() + rng.uniform(5, 20)
                insert(held, rec)
                held_rows.append(rec)
            else:
                insert(conn, rec)
            i += 1
        except psycopg.OperationalError:
            # the server went away: the held transaction's rows were not committed, so they are written again
            for c in (conn, held):
                if c is not None:
                    with contextlib.suppress(Exception):
                        c.close()
            records[i:i] = held_rows
            rows += len(held_rows)
            held, held_rows = None, []
            conn = _connect(url, autocommit=True)
    if held is not None:
        held.commit()
        late_rows += len(held_rows)
    Path(out).write_text(json.dumps({"late": late_rows}))


# -- the watchers ---------------------------------------------------------------------------------------------


class Loop:
    """The cron-like loop: a `watch run NAME --once` process every `interval` s while fewer than `processes` run."""

    def __init__(self, name: str, cfg: Config, env: dict[str, str], workdir: Path):
        self.name, self.cfg, self.env, self.workdir = name, cfg, env, workdir
        self.running: list[tuple[subprocess.Popen, Path, float]] = []
        self.done: list[tuple[int, Path, float]] = []  # exit status, stderr, seconds
        self.last = 0.0

    def tick(self) -> None:
        """Reap the finished watchers; start one if it is time and there is room."""
        for proc, err, began in list(self.running):
            if proc.poll() is not None:
                self.running.remove((proc, err, began))
                self.done.append((proc.returncode, err, time.monotonic() - began))
        now = time.monotonic()
        if len(self.running) < self.cfg.processes and now - self.last >= self.cfg.interval:
            self.last = now
            err = self.workdir / f"{self.name}-{len(self.done) + len(self.running)}.stderr"
            workers = max(1, self.cfg.workers // self.cfg.processes)
            command = [sys.executable, "-m", "ragsql", "watch", "run", self.name, "--once", "--workers", str(workers)]
            with open(err, "w") as stderr:
                proc = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=stderr)
            self.running.append((proc, err, now))

    def kill_one(self) -> int | None:
        """SIGKILL the oldest running watcher; its pid, or None when none runs."""
        if not self.running:
            return None
        proc = self.running[0][0]
        proc.send_signal(signal.SIGKILL)
        return proc.pid

    def stop(self) -> None:
        """Wait for the running watchers (SIGTERM after a minute)."""
        for proc, err, began in self.running:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait(timeout=30)
            self.done.append((proc.returncode, err, time.monotonic() - began))
        self.running = []


# -- one phase ------------------------------------------------------------------------------------------------

SOURCE = """
create schema if not exists app;
create table app.{table} (
    id bigint generated always as identity primary key,
    logged_at timestamptz not null default clock_timestamp(),
    question text not null,
    answer text,
    contexts jsonb
);
"""


def _cli(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "ragsql", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ragsql {' '.join(args)}: {done.stderr.strip()}")


def _judged(url: str, name: str, table: str, sample: float) -> tuple[int, int]:
    """(sampled source rows, those with a done verdict)."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute(
            f"select count(*), count(v.qid) from app.{table} as s left join ({_VERDICTS}) as v on v.qid = s.id::text "
            "where ragsql.watch_sample_point(s.id::text) < %s",
            (name, sample),
        ).fetchone()
    return (row[0], row[1]) if row else (0, 0)


_VERDICTS = """
select q.qid, max(t.updated_at) as at
from ragsql.watch as w
join ragsql.watch_window as ww on ww.watch_id = w.id
join ragsql.run as r on r.id = ww.run_id
join ragsql.query as q on q.dataset_id = r.dataset_id
join ragsql.judge_task as t on t.run_id = r.id and t.query_id = q.id and t.status = 'done'
where w.name = %s
group by q.qid
"""


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run_phase(cfg: Config, sample: float, url: str, server: Server, fake: FakeProcess, workdir: Path) -> Phase:
    """Rows arriving in a fresh table for `minutes`, watched at `sample`, with a SIGKILL and a restart mid-way."""
    phase = Phase(sample=sample)
    table = f"log_{round(sample * 100)}"
    name = f"bench{round(sample * 100)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAGSQL_JUDGE_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        RAGSQL_DATABASE_URL=url,
        RAGSQL_JUDGE_BASE_URL=fake.base_url,
        RAGSQL_JUDGE_API_KEY="bench",
        RAGSQL_JUDGE_MODEL="fake-judge",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SOURCE.format(table=table))
    _cli(
        env,
        *("watch", "add", name, "--source", f"app.{table}", "--key", "id", "--time", "logged_at"),
        *("--question", "question", "--answer", "answer", "--contexts", "contexts"),
        *("--sample", str(sample), "--metrics", METRIC),
    )
    rows = round(cfg.rows_per_minute * cfg.minutes)
    seconds = cfg.minutes * 60
    out = workdir / f"{table}.writer.json"
    writer = multiprocessing.get_context("spawn").Process(
        target=write, args=(url, table, rows, seconds, cfg.late, cfg.seed + round(sample * 1000), str(out))
    )
    loop = Loop(name, cfg, env, workdir)
    wall = time.time()
    start = time.monotonic()
    writer.start()
    marks = [(cfg.kill_at, "kill"), (cfg.restart_at, "restart")]
    while writer.is_alive():
        loop.tick()
        elapsed = time.monotonic() - start
        if marks and elapsed >= marks[0][0] * seconds:
            _, what = marks[0]
            if what == "kill":
                pid = loop.kill_one()
                if pid is None:
                    loop.tick()
                    time.sleep(0.2)
                    continue
                phase.events.append(f"{elapsed:.0f} s: watcher {pid} SIGKILLed")
                phase.marks.append(time.time())
            else:
                began = time.monotonic()
                server.restart("fast")
                phase.marks.append(time.time())
                phase.events.append(f"{elapsed:.0f} s: PostgreSQL restarted ({time.monotonic() - began:.1f} s down)")
            marks.pop(0)
        time.sleep(0.2)
    writer.join()
    phase.write_seconds = time.monotonic() - start
    phase.late_rows = json.loads(out.read_text())["late"] if out.exists() else -1
    drained = time.monotonic()
    deadline = drained + cfg.drain
    while time.monotonic() < deadline:
        loop.tick()
        with contextlib.suppress(psycopg.OperationalError):
            sampled, judged = _judged(url, name, table, sample)
            if judged >= sampled:  # every sampled row has its verdict: the running watchers find nothing more
                break
        time.sleep(1.0)
    loop.stop()
    phase.drain_seconds = time.monotonic() - drained
    _measure(url, name, table, phase)
    phase.watchers = len(loop.done)
    phase.exits = dict(Counter(str(code) for code, _, _ in loop.done))
    phase.tracebacks = sum("Traceback" in err.read_text(errors="replace") for _, err, _ in loop.done)
    phase.watcher_seconds = [round(s, 1) for _, _, s in loop.done]
    _calls(url, fake, workdir / f"{table}.fake.jsonl", phase, wall)
    return phase


def _measure(url: str, name: str, table: str, phase: Phase) -> None:
    with psycopg.connect(url) as conn:
        phase.committed = conn.execute(f"select count(*) from app.{table}").fetchone()[0]
        rows = conn.execute(
            "select extract(epoch from coalesce(pg_xact_commit_timestamp(s.xmin), s.logged_at)), "
            "extract(epoch from v.at) "
            f"from app.{table} as s left join ({_VERDICTS}) as v on v.qid = s.id::text "
            "where ragsql.watch_sample_point(s.id::text) < %s",
            (name, phase.sample),
        ).fetchall()
        phase.stored_twice = conn.execute(
            "select count(*) - count(distinct request_hash) from ragsql.judge_call where status = 'ok'"
        ).fetchone()[0]
    phase.sampled = len(rows)
    judged = [(float(c), float(v)) for c, v in rows if v is not None]
    phase.judged = len(judged)
    phase.lost = phase.sampled - phase.judged
    lags = [v - c for c, v in judged]
    if judged:
        phase.span_seconds = max(v for _, v in judged) - min(c for c, _ in judged)
        phase.lag = {
            "p50": statistics.median(lags),
            "p95": _percentile(lags, 0.95),
            "max": max(lags),
        }


def _calls(url: str, fake: FakeProcess, path: Path, phase: Phase, began: float) -> None:
    """Chat purchases as the fake saw them (the requests since `began`, this phase's), against the replies stored."""
    logs = [r for r in fake.dump(path) if r["route"] == "chat" and r["t"] >= began]
    with psycopg.connect(url) as conn:
        stored = dict(
            (h, float(t))
            for h, t in conn.execute(
                "select request_hash, extract(epoch from created_at) from ragsql.judge_call "
                "where kind = 'chat' and status = 'ok'"
            ).fetchall()
        )
    bought: dict[str, list[float]] = defaultdict(list)
    for r in logs:
        if r["outcome"] == 200 and not r["repair"] and not r["longer"]:
            bought[r["hash"]].append(r["t"])
    twice = {h: sorted(ts) for h, ts in bought.items() if len(ts) > 1}
    # bought before a SIGKILL or a restart (a request read by the fake up to 1 s after the signal was sent before
    # it) and again after it: a reply the process had received but not stored when it died or lost its database
    straddle = sum(1 for ts in twice.values() if any(ts[0] <= m + 1.0 and ts[-1] > m for m in phase.marks))
    phase.chat = {
        "requests": len(logs),
        "unique": len({r["hash"] for r in logs}),
        "bought twice": len(twice),
        "bought twice across the kill or restart": straddle,
        "sent after stored": sum(1 for r in logs if r["hash"] in stored and r["t"] > stored[r["hash"]] + 0.5),
    }


def run_bench(cfg: Config) -> list[Phase]:
    """Every phase, in one scratch server and one fake."""
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragsql-watch-bench-")))
        server = Server(cfg.home or workdir / "home", DATABASE)
        url = server.start()
        stack.callback(server.stop)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("alter system set track_commit_timestamp = on")  # the commit time of every source row
        server.restart("fast")
        fake = FakeProcess("fake", cfg.latency, None, cfg.seed, 4.0)
        stack.callback(fake.close)
        phases = [run_phase(cfg, s, url, server, fake, workdir) for s in cfg.samples]
        if cfg.keep is not None:
            cfg.keep.mkdir(parents=True, exist_ok=True)
            for path in [*workdir.glob("*.stderr"), *workdir.glob("*.jsonl")]:
                shutil.copy(path, cfg.keep)
        return phases


# -- the report -----------------------------------------------------------------------------------------------


def rows(phases: list[Phase], cfg: Config) -> list[tuple[str, ...]]:
    """(measure, value per phase..., goal) rows of the table."""

    def each(f) -> list[str]:
        return [f(p) for p in phases]

    def lag(p: Phase, k: str) -> str:
        return f"{p.lag[k]:.1f}" if p.lag else "-"

    return [
        (
            "rows committed (late: in transactions held 5-20 s)",
            *each(lambda p: f"{p.committed:,} ({p.late_rows:,})"),
            "",
        ),
        ("rows committed / s", *each(lambda p: f"{p.committed / p.write_seconds:.1f}" if p.write_seconds else "-"), ""),
        ("sampled rows / judged", *each(lambda p: f"{p.sampled:,} / {p.judged:,}"), ""),
        (
            "rows judged / s, sustained",
            *each(lambda p: f"{p.judged / p.span_seconds:.1f}" if p.span_seconds else "-"),
            "",
        ),
        ("lag commit → verdict, p50 (s)", *each(lambda p: lag(p, "p50")), ""),
        ("lag commit → verdict, p95 (s)", *each(lambda p: lag(p, "p95")), "< 60 at 100%"),
        ("lag commit → verdict, max (s)", *each(lambda p: lag(p, "max")), ""),
        (
            "one watch run process, median / max (s)",
            *each(
                lambda p: (
                    f"{statistics.median(p.watcher_seconds):.1f} / {max(p.watcher_seconds):.1f}"
                    if p.watcher_seconds
                    else "-"
                )
            ),
            "",
        ),
        ("drain after the last row (s)", *each(lambda p: f"{p.drain_seconds:.0f}"), ""),
        ("rows lost (sampled, no verdict)", *each(lambda p: f"{p.lost:,}"), "0"),
        ("chat requests / unique", *each(lambda p: f"{p.chat['requests']:,} / {p.chat['unique']:,}"), ""),
        (
            "calls bought twice (of which bought before the kill or restart, again after)",
            *each(lambda p: f"{p.chat['bought twice']} ({p.chat['bought twice across the kill or restart']})"),
            "0 outside",
        ),
        ("requests sent after their reply was stored", *each(lambda p: str(p.chat["sent after stored"])), "0"),
        ("judge_call: one request stored ok twice", *each(lambda p: str(p.stored_twice)), "0"),
        (
            "watcher processes (exit status: count); with a traceback",
            *each(
                lambda p: f"{p.watchers} ({', '.join(f'{k}: {v}' for k, v in sorted(p.exits.items()))}); {p.tracebacks}"
            ),
            "",
        ),
    ]


def print_report(phases: list[Phase], cfg: Config, out=sys.stdout) -> None:
    """The table, as Markdown, then the events."""
    heads = [f"sample {p.sample:.0%}" for p in phases]
    print(f"| measure | {' | '.join(heads)} | goal |", file=out)
    print(f"|---|{'---:|' * len(phases)}---:|", file=out)
    for row in rows(phases, cfg):
        print(f"| {' | '.join(row)} |", file=out)
    for p in phases:
        print(f"\nsample {p.sample:.0%}: " + "; ".join(p.events), file=out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-per-minute", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10.0, help="writing time per sampling fraction")
    parser.add_argument("--sample", type=float, nargs="+", default=[0.1, 1.0], help="one phase per fraction")
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--workers", type=int, default=8, help="judge workers in all, split over --processes")
    parser.add_argument("--processes", type=int, default=2, help="watch run processes at once")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between two starts of the loop")
    parser.add_argument("--late", type=float, default=0.05, help="share of rows committed late")
    parser.add_argument("--drain", type=float, default=600.0, help="most seconds to wait for the last verdicts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--home", type=Path, default=None, help="RAGSQL_HOME of the scratch server")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy the fake's request log and the watchers' stderr here"
    )
    parser.add_argument("--json", action="store_true", help="print the measures as JSON")
    args = parser.parse_args()
    cfg = Config(
        rows_per_minute=args.rows_per_minute,
        minutes=args.minutes,
        samples=tuple(args.sample),
        latency=args.latency_ms / 1000,
        workers=args.workers,
        processes=args.processes,
        interval=args.interval,
        late=args.late,
        drain=args.drain,
        seed=args.seed,
        home=args.home,
        keep=args.keep,
    )
    phases = run_bench(cfg)
    if args.json:
        print(json.dumps({"config": asdict(cfg), "phases": [asdict(p) for p in phases]}, indent=2, default=str))
    else:
        print_report(phases, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
