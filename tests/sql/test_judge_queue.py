"""The judge work queue: claiming with leases, skip-locked concurrency, finishing, failing and retrying."""

from __future__ import annotations

import threading

import psycopg
import pytest

CLAIM = "select id, query_id, kind, attempts from ragsql._claim_judge_tasks(%s, %s, %s, %s)"


def answered_run(conn, n: int, run: str = "r") -> int:
    """A run with n answered queries; returns its id."""
    ds = conn.execute("insert into ragsql.dataset (name) values (%s) returning id", (f"ds_{run}",)).fetchone()[0]
    run_id = conn.execute(
        "insert into ragsql.run (name, dataset_id) values (%s, %s) returning id", (run, ds)
    ).fetchone()[0]
    conn.execute(
        "with q as (insert into ragsql.query (dataset_id, qid) select %s, 'q' || i from generate_series(1, %s) as i "
        "returning id) insert into ragsql.answer (run_id, dataset_id, query_id, text) select %s, %s, q.id, 'answer' from q",
        (ds, n, run_id, ds),
    )
    return run_id


def enqueue(conn, run_id: int, kinds: list[str]) -> int:
    """Queue a task per answered query and kind; returns how many were added or reset."""
    return conn.execute("select ragsql._enqueue_judge_tasks(%s, %s)", (run_id, kinds)).fetchone()[0]


def test_two_connections_never_claim_the_same_task(fresh_db):
    """A claim skips the rows another open transaction holds, and four workers draining a run judge each task once."""
    with psycopg.connect(fresh_db) as setup:
        run_id = answered_run(setup, 30)
        assert enqueue(setup, run_id, ["faithfulness", "context_recall"]) == 60
    with psycopg.connect(fresh_db) as a, psycopg.connect(fresh_db) as b:
        b.execute("set lock_timeout = '2s'")  # a claim that waited on a's locks would fail here
        held = a.execute(CLAIM, (run_id, "a", 5, "5 minutes")).fetchall()
        meanwhile = b.execute(CLAIM, (run_id, "b", 5, "5 minutes")).fetchall()
        assert len(held) == len(meanwhile) == 5
        assert not {t[0] for t in held} & {t[0] for t in meanwhile}
        a.commit()
        b.commit()

    claimed: list[int] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        with psycopg.connect(fresh_db) as conn:
            while True:
                rows = conn.execute(CLAIM, (run_id, name, 2, "5 minutes")).fetchall()
                if not rows:
                    conn.commit()
                    return
                for task_id, *_ in rows:
                    assert conn.execute(
                        "select ragsql._finish_judge_task(%s, %s, %s)", (run_id, task_id, name)
                    ).fetchone()[0]
                conn.commit()
                with lock:
                    claimed.extend(task_id for task_id, *_ in rows)

    workers = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=60)
    assert len(claimed) == len(set(claimed)) == 50  # 60 tasks, 10 still leased to a and b
    with psycopg.connect(fresh_db) as check:
        states = dict(check.execute("select status, count(*) from ragsql.judge_task group by status").fetchall())
    assert states == {"done": 50, "running": 10}


def test_expired_lease_is_reclaimed_and_the_old_worker_cannot_finish(db):
    """A live lease keeps a task from others; once expired another worker gets it and the first one's finish is refused."""
    run_id = answered_run(db, 1)
    enqueue(db, run_id, ["faithfulness"])
    ((task_id, _, kind, attempts),) = db.execute(CLAIM, (run_id, "w1", 10, "5 minutes")).fetchall()
    assert (kind, attempts) == ("faithfulness", 1)
    assert db.execute(CLAIM, (run_id, "w2", 10, "5 minutes")).fetchall() == []
    assert (
        db.execute("select ragsql._renew_judge_lease(%s, %s, 'w1', '1 minute')", (run_id, task_id)).fetchone()[0]
        is True
    )
    db.execute("update ragsql.judge_task set lease_until = now() - interval '1 second' where id = %s", (task_id,))
    assert db.execute(CLAIM, (run_id, "w2", 10, "5 minutes")).fetchall() == [
        (task_id, db.execute("select query_id from ragsql.judge_task").fetchone()[0], "faithfulness", 2)
    ]
    assert db.execute("select ragsql._finish_judge_task(%s, %s, 'w1')", (run_id, task_id)).fetchone()[0] is False
    assert db.execute("select ragsql._renew_judge_lease(%s, %s, 'w1')", (run_id, task_id)).fetchone()[0] is False
    assert db.execute("select ragsql._finish_judge_task(%s, %s, 'w2')", (run_id, task_id)).fetchone()[0] is True
    assert db.execute("select status, worker, lease_until from ragsql.judge_task").fetchone() == ("done", "w2", None)


def test_finished_and_failed_tasks_are_not_reclaimed(db):
    """Done and failed tasks are never handed out again; a failed task's error becomes the metric's reason."""
    run_id = answered_run(db, 2)
    enqueue(db, run_id, ["faithfulness"])
    first, second = sorted(db.execute(CLAIM, (run_id, "w", 2, "5 minutes")).fetchall(), key=lambda t: t[1])
    db.execute("select ragsql._finish_judge_task(%s, %s, 'w')", (run_id, first[0]))
    db.execute("select ragsql._finish_judge_task(%s, %s, 'w', 'HTTP 500 after 5 attempts')", (run_id, second[0]))
    db.execute("update ragsql.judge_task set updated_at = now() - interval '1 day'")
    assert db.execute(CLAIM, (run_id, "other", 10, "1 second")).fetchall() == []
    reasons = db.execute("select qid, value, reason from ragsql.generation_measure('r', 'faithfulness')").fetchall()
    assert reasons == [
        ("q1", None, "judge task done but no verdicts stored"),
        ("q2", None, "judge failed: HTTP 500 after 5 attempts"),
    ]


def test_a_task_whose_lease_keeps_expiring_fails_and_enqueue_retries_it(db):
    """After max_attempts expired leases the task is failed with a reason; enqueueing again resets it to pending."""
    run_id = answered_run(db, 1)
    enqueue(db, run_id, ["citations"])
    expire = "update ragsql.judge_task set lease_until = now() - interval '1 second' where status = 'running'"
    claim = "select id from ragsql._claim_judge_tasks(%s, %s, 1, '5 minutes', 2)"
    assert db.execute(claim, (run_id, "w1")).fetchall() != []
    db.execute(expire)
    assert db.execute(claim, (run_id, "w2")).fetchall() != []
    db.execute(expire)
    assert db.execute(claim, (run_id, "w3")).fetchall() == []
    task = db.execute("select status, attempts, last_error from ragsql.judge_task").fetchone()
    assert task == ("failed", 2, "lease expired 2 times (last worker w2)")
    assert enqueue(db, run_id, ["citations"]) == 1
    assert db.execute("select status, attempts from ragsql.judge_task").fetchone() == ("pending", 0)
    assert enqueue(db, run_id, ["citations"]) == 0


def test_claim_by_kind_and_requeue_done_tasks_for_another_judge(db):
    """A worker may claim only some kinds; reset_done puts done tasks back, as judging with another model needs."""
    run_id = answered_run(db, 2)
    enqueue(db, run_id, ["faithfulness", "citations"])
    claim = "select kind from ragsql._claim_judge_tasks(%s, 'w', 10, '5 minutes', kinds => %s)"
    assert db.execute(claim, (run_id, ["citations"])).fetchall() == [("citations",), ("citations",)]
    assert db.execute("select count(*) from ragsql.judge_task where status = 'pending'").fetchone()[0] == 2
    db.execute("update ragsql.judge_task set status = 'done', lease_until = null")
    assert enqueue(db, run_id, ["faithfulness"]) == 0
    reset = db.execute(
        "select ragsql._enqueue_judge_tasks(%s, array['faithfulness'], reset_done => true)", (run_id,)
    ).fetchone()[0]
    assert reset == 2
    states = db.execute("select kind, status from ragsql.judge_task group by kind, status order by kind").fetchall()
    assert states == [("citations", "done"), ("faithfulness", "pending")]


def test_done_tasks_go_back_to_pending_for_another_judge_only(db):
    """A task closed by judge A stays done for A; enqueueing for judge B puts it back to pending."""
    run_id = answered_run(db, 2)
    enqueue(db, run_id, ["faithfulness"])
    for (task_id,) in db.execute("select id from ragsql._claim_judge_tasks(%s, 'w', 10)", (run_id,)).fetchall():
        assert db.execute(
            "select ragsql._finish_judge_task(%s, %s, 'w', null, 'model-a + emb')", (run_id, task_id)
        ).fetchone()[0]
    same = "select ragsql._enqueue_judge_tasks(%s, array['faithfulness'], judge => %s)"
    assert db.execute(same, (run_id, "model-a + emb")).fetchone()[0] == 0
    assert db.execute(same, (run_id, "model-b + emb")).fetchone()[0] == 2
    assert db.execute("select array_agg(distinct status) from ragsql.judge_task").fetchone()[0] == ["pending"]


@pytest.mark.parametrize(
    ("worker", "n", "lease", "message"),
    [("", 1, "1 minute", "worker name"), ("w", 0, "1 minute", "n must be"), ("w", 1, "0 seconds", "lease must")],
)
def test_claim_rejects_bad_arguments(db, worker, n, lease, message):
    """An empty worker name, n < 1 or a non-positive lease raise invalid_parameter_value."""
    run_id = answered_run(db, 1)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        db.execute(CLAIM, (run_id, worker, n, lease))


def test_deleting_an_answer_removes_its_tasks_and_verdicts(db):
    """Tasks and verdicts hang off the answer: replacing an answer leaves nothing stale behind."""
    run_id = answered_run(db, 1)
    enqueue(db, run_id, ["faithfulness"])
    db.execute("delete from ragsql.answer where run_id = %s", (run_id,))
    assert db.execute("select count(*) from ragsql.judge_task").fetchone()[0] == 0


def test_unjudged_definitions_names_the_answers_lacking_a_verdict_on_an_aspect_or_rubric_as_defined_now(db):
    """An aspect verdict on an earlier definition or none at all leaves the answer unjudged; a rubric with reference
    asks only the queries that have a reference answer; the kinds asked for limit what is named."""
    db.execute("delete from ragsql.aspect")
    db.execute("delete from ragsql.rubric")
    run_id = answered_run(db, 3, run="unjudged")
    q1, q2, q3 = (
        r[0]
        for r in db.execute(
            "select id from ragsql.query where qid in ('q1', 'q2', 'q3') "
            "and dataset_id = (select dataset_id from ragsql.run where id = %s) "
            "order by qid",
            (run_id,),
        )
    )
    db.execute("insert into ragsql.reference_answer (query_id, position, text) values (%s, 1, 'gold')", (q1,))
    db.execute("insert into ragsql.aspect (name, definition) values ('a1', 'Is it kind?')")
    db.execute(
        "insert into ragsql.rubric (name, descriptions, with_reference) "
        "values ('r1', array['s1', 's2', 's3', 's4', 's5'], true)"
    )
    call = db.execute(
        "insert into ragsql.judge_call (request_hash, model, prompt_name, status, response) "
        "values (repeat('a', 64), 'm', 'critique', 'ok', '{}') returning id"
    ).fetchone()[0]
    for query_id, definition in [(q1, "Is it kind?"), (q2, "Was it kind?")]:
        db.execute(
            "insert into ragsql.aspect_verdict (run_id, query_id, aspect, model, prompt_version, "
            "definition_hash, verdict, call_id) values (%s, %s, 'a1', 'm', 'v1', ragsql.text_hash(%s), true, %s)",
            (run_id, query_id, definition, call),
        )

    def unjudged(kinds: list[str]) -> list[tuple[int, str]]:
        sql = "select query_id, kind from ragsql._unjudged_definitions(%s, %s, 'm')"
        return [tuple(r) for r in db.execute(sql, (run_id, kinds))]

    both = unjudged(["aspect_critique", "rubrics_score"])
    assert both == sorted([(q1, "rubrics_score"), (q2, "aspect_critique"), (q3, "aspect_critique")])
    assert unjudged(["rubrics_score"]) == [(q1, "rubrics_score")]
    assert unjudged(["faithfulness"]) == []
