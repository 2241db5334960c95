-- A run's values depend only on what was done for that run (issue 26).
--
-- ragsql.run_embedder records which embedder judged a run, with which judge model: the embedding metrics of a run
-- read the embedder its chosen judge used, never "the newest embedding of any of its texts in the database" (which
-- another run's judging, or an offline judge after an LLM one, used to change).
--
-- ragsql.judge_call.for_run_id and .purpose record for which run, and for what (judge, synth, rerank, generate), a
-- call was sent, so a run's cost is the calls bought for it (ragsql.run_usage); a call reused from the cache
-- costs nothing and keeps the run that bought it. Calls stored before this migration have neither.

-- the two-argument chooser (newest embedding of the run's texts anywhere) gives way to ragsql._run_embedder(run_id,
-- embedder, model) in sql/functions/20_generation.sql
drop function if exists ragsql._run_embedder(bigint, text);

create table if not exists ragsql.run_embedder (
    run_id bigint not null references ragsql.run (id) on delete cascade,
    judge_model text not null check (btrim(judge_model) <> ''),
    embedder text not null check (btrim(embedder) <> ''),
    created_at timestamptz not null default now(),
    primary key (run_id, judge_model, embedder)
);
comment on table ragsql.run_embedder is
    'The embedders that judged a run, each with the judge model it judged with (the judge''s identity is '
    '"<model> + <embedder>"): the embedding metrics of the run read the embedder of the verdict set in use.';

alter table ragsql.judge_call
    add column if not exists for_run_id bigint,
    add column if not exists purpose text;
comment on column ragsql.judge_call.for_run_id is
    'The run the call was sent for (null: for no run, e.g. synth, or stored before 0170). No foreign key: a '
    'deleted run''s calls stay in the cache. Not named run_id: judge_call is no run-scoped table (on Citus a '
    'reference table, not distributed by run).';
comment on column ragsql.judge_call.purpose is 'What the call was sent for: judge, synth, rerank or generate.';

do $$
begin
    if not exists (select from ragsql.schema_migration where name = '0170_run_owned_choices') then
        alter table ragsql.judge_call
            add constraint judge_call_purpose_check
                check (purpose in ('judge', 'synth', 'rerank', 'generate'));
        -- what the judge queue recorded: the identity ("<model> + <embedder>") that closed each task
        insert into ragsql.run_embedder (run_id, judge_model, embedder, created_at)
        select t.run_id,
               left(t.judge, length(t.judge) - strpos(reverse(t.judge), reverse(' + ')) - 2),
               right(t.judge, strpos(reverse(t.judge), reverse(' + ')) - 1),
               max(t.updated_at)
        from ragsql.judge_task as t
        where t.status = 'done' and strpos(t.judge, ' + ') > 0
        group by 1, 2, 3
        on conflict do nothing;
    end if;
end
$$;

insert into ragsql.schema_migration (name) values ('0170_run_owned_choices') on conflict do nothing;
