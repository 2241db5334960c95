-- Objects of earlier releases that this one no longer has. Since migrations run once (install.sql's \if,
-- ragsql db init's ledger check), a function removed from sql/functions/ is dropped here, or it would stay
-- in every database installed before.

-- replaced by ragsql._bm25_scores (the lower bound and the final top k share one scoring function)
drop function if exists ragsql._bm25_kth(ragsql.corpus_version, text[], float8[], integer[], integer);

-- 0020_judge was edited after its first releases (962adda, b929738, ab89faa, e95b755): databases installed
-- by those lack what the later edits added, since `create table if not exists` skips an existing table.
alter table ragsql.judge_task add column if not exists judge text;
comment on table ragsql.judge_task is
    'Work queue of the judge: one task per (run, query, kind). Workers claim pending tasks and tasks whose '
    'lease expired with ragsql._claim_judge_tasks (for update skip locked) and close them with '
    'ragsql._finish_judge_task in the transaction that stores the verdicts. last_error says why a failed '
    'task''s metrics are null; judge names the judge model and embedder that closed it, so judging again with '
    'another one repeats the task.';
do $$
begin
    if (select pg_get_constraintdef(n.oid) not like '%rerank%' from pg_constraint as n
        where n.conrelid = 'ragsql.judge_call'::regclass and n.conname = 'judge_call_kind_check') then
        alter table ragsql.judge_call drop constraint judge_call_kind_check,
            add constraint judge_call_kind_check check (kind in ('chat', 'embedding', 'rerank'));
    end if;
end
$$;
comment on table ragsql.judge_call is
    'One row per LLM, embedding or rerank call, failed ones included. request_hash = sha256 hex of (model, messages, '
    'parameters) is the cache key: the validated reply of a successful call (response) is reused by every later '
    'identical request, across runs, processes and machines (ragsql.cached_response).';
alter table ragsql.citation_verdict alter column call_id drop not null;
comment on table ragsql.citation_verdict is
    'Citations of each answer sentence (seed retrieval-metrics 5.1): citation_no 0 (docno and supports null) '
    'marks a sentence without citation; citation_no >= 1 is one cited docno and whether that item supports '
    'the sentence (a docno not among the contexts does not). call_id is null where no call was needed: a '
    'sentence without citation, a citation of an item that is not among the answer''s contexts.';
update ragsql.generation_metric
set task_kind = 'answer_relevancy_rating',
    description = '(judge score 1-5 - 1) / 4; one more call per answer, so judged only when asked for'
where metric = 'answer_relevancy_rating' and task_kind = 'answer_relevancy';

insert into ragsql.schema_migration (name) values ('0060_upgrade') on conflict do nothing;
