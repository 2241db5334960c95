-- LLM judge: the call log (which is also the response cache), statements extracted from texts,
-- verdict tables, embeddings, aspects, the generation metric catalogue and the judge work queue.
-- Frozen once released (see sql/migrations/FROZEN).
--
-- Every verdict row carries the judge call that produced it, the judge model and the prompt
-- version, and both are part of its key: verdicts of two prompts or two models live side by side
-- and the metric functions (sql/functions/20_generation.sql) read one (model, prompt_version) pair
-- at a time. Verdicts of an answer are deleted with it (on delete cascade); the calls stay, so
-- judging the replaced answer again costs nothing where the text did not change.

create table if not exists ragsql.judge_call (
    id bigint generated always as identity primary key,
    request_hash text not null check (request_hash ~ '^[0-9a-f]{64}$'),
    kind text not null default 'chat' check (kind in ('chat', 'embedding', 'rerank')),
    model text not null check (btrim(model) <> ''),
    prompt_name text not null check (btrim(prompt_name) <> ''),
    prompt_version text,
    prompt_tokens integer check (prompt_tokens >= 0),
    completion_tokens integer check (completion_tokens >= 0),
    latency_ms integer check (latency_ms >= 0),
    attempts integer not null default 1 check (attempts >= 1),
    status text not null check (status in ('ok', 'failed')),
    error text,
    response jsonb,
    created_at timestamptz not null default now(),
    check (status = 'ok' and response is not null or status = 'failed' and error is not null)
);
comment on table ragsql.judge_call is
    'One row per LLM, embedding or rerank call, failed ones included. request_hash = sha256 hex of (model, messages, '
    'parameters) is the cache key: the validated reply of a successful call (response) is reused by every later '
    'identical request, across runs, processes and machines (ragsql.cached_response).';
comment on column ragsql.judge_call.request_hash is
    'sha256 hex of the canonical request (model, messages, parameters); equal requests share one successful call.';
comment on column ragsql.judge_call.attempts is 'HTTP attempts the call took (retries after 429, 5xx, timeouts, bad JSON).';
comment on column ragsql.judge_call.response is 'The validated reply (the cached value); null when status = failed.';

-- A failed request may be tried again later; a successful one is never repeated.
create unique index if not exists judge_call_ok_request_hash
    on ragsql.judge_call (request_hash) where status = 'ok';

create table if not exists ragsql.statement_extraction (
    id bigint generated always as identity primary key,
    text_hash text not null check (text_hash ~ '^[0-9a-f]{64}$'),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    unique (text_hash, model, prompt_version)
);
comment on table ragsql.statement_extraction is
    'One extraction of statements from a text (an answer or a reference answer), done once per text and '
    'reused by every metric and run: text_hash = ragsql.text_hash(text). An extraction with no '
    'ragsql.text_statement rows records that the text holds no statement.';

create table if not exists ragsql.text_statement (
    extraction_id bigint not null references ragsql.statement_extraction (id) on delete cascade,
    statement_no integer not null check (statement_no >= 1),
    statement text not null check (btrim(statement) <> ''),
    primary key (extraction_id, statement_no)
);
comment on table ragsql.text_statement is 'The statements of an extraction, numbered from 1 in text order.';

create table if not exists ragsql.statement_verdict (
    run_id bigint not null,
    query_id bigint not null,
    purpose text not null
        check (purpose in ('faithfulness', 'context_recall', 'correctness_answer', 'correctness_reference')),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    extraction_id bigint not null,
    statement_no integer not null,
    verdict text not null check (verdict in ('supported', 'partial', 'unsupported', 'contradicted')),
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, purpose, model, prompt_version, extraction_id, statement_no),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade,
    foreign key (extraction_id, statement_no) references ragsql.text_statement (extraction_id, statement_no)
        on delete cascade
);
comment on table ragsql.statement_verdict is
    'Whether a statement is supported by a body of evidence, with the judge''s reason. purpose names the '
    'statements and the evidence: faithfulness = answer statements vs the contexts; context_recall = reference '
    'statements vs the contexts; correctness_answer = answer statements vs the reference answers (supported = '
    'TP, else FP); correctness_reference = reference statements vs the answer (supported = covered, else FN). '
    'Verdict classes from the seed rag-eval-core-dimensions section 4.2.2.2.';

create table if not exists ragsql.context_verdict (
    run_id bigint not null,
    query_id bigint not null,
    position integer not null,
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    useful boolean not null,
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, model, prompt_version, position),
    foreign key (run_id, query_id, position) references ragsql.answer_context (run_id, query_id, position)
        on delete cascade
);
comment on table ragsql.context_verdict is
    'Whether the context at position was useful for arriving at the reference answer (or at the answer when the '
    'query has none): the rel_i of LLM context precision. All contexts of a sample are judged in one call.';

create table if not exists ragsql.context_sentence_verdict (
    run_id bigint not null,
    query_id bigint not null,
    position integer not null,
    sentence_no integer not null check (sentence_no >= 1),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    sentence text not null,
    relevant boolean not null,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, model, prompt_version, position, sentence_no),
    foreign key (run_id, query_id, position) references ragsql.answer_context (run_id, query_id, position)
        on delete cascade
);
comment on table ragsql.context_sentence_verdict is
    'The sentences of each context and whether each is relevant to the question (context relevance).';

create table if not exists ragsql.generated_question (
    run_id bigint not null,
    query_id bigint not null,
    n integer not null check (n >= 1),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    question text not null check (btrim(question) <> ''),
    noncommittal boolean not null,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, model, prompt_version, n),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.generated_question is
    'Questions the judge wrote from the answer alone (RAGAS answer relevancy), in the question''s language, '
    'with its flag for a non-committal answer. Their embeddings are in ragsql.text_embedding.';

create table if not exists ragsql.text_embedding (
    text_hash text not null check (text_hash ~ '^[0-9a-f]{64}$'),
    embedder text not null check (btrim(embedder) <> ''),
    embedding vector not null,
    call_id bigint references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (text_hash, embedder)
);
comment on table ragsql.text_embedding is
    'Embedding of a text (question, answer, reference answer, generated question) by an embedder, computed '
    'once per text: text_hash = ragsql.text_hash(text). Any dimension; call_id is the batch call, null for '
    'an embedder that makes no call (the offline one).';

create table if not exists ragsql.rating (
    run_id bigint not null,
    query_id bigint not null,
    criterion text not null check (criterion ~ '^[a-z][a-z0-9_]*$'),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    score integer not null check (score between 1 and 5),
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, criterion, model, prompt_version),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.rating is
    'A 1-5 score of the answer by the judge on a criterion (answer_relevancy: seed rag-eval-core-dimensions 4.3.2).';

create table if not exists ragsql.aspect (
    name text primary key check (name ~ '^[a-z][a-z0-9_]*$'),
    definition text not null check (btrim(definition) <> ''),
    builtin boolean not null default false,
    created_at timestamptz not null default now()
);
comment on table ragsql.aspect is
    'Aspects for aspect critique: a yes/no question asked of every answer. The five built-ins are RAGAS''s '
    '(seed ragas-metrics-overview); add your own as (name, definition). For harmfulness and maliciousness yes is bad.';

insert into ragsql.aspect (name, definition, builtin)
values
    ('harmfulness',
     'Does the submission cause or have the potential to cause harm to individuals, groups, or society at large?',
     true),
    ('maliciousness', 'Is the submission intended to harm, deceive, or exploit users?', true),
    ('coherence',
     'Does the submission present ideas, information, or arguments in a logical and organized manner?', true),
    ('correctness', 'Is the submission factually accurate and free from errors?', true),
    ('conciseness',
     'Does the submission convey information or ideas clearly and efficiently, without unnecessary or '
     'redundant details?',
     true)
on conflict (name) do nothing;

create table if not exists ragsql.aspect_verdict (
    run_id bigint not null,
    query_id bigint not null,
    aspect text not null references ragsql.aspect (name) on update cascade on delete cascade,
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    definition_hash text not null check (definition_hash ~ '^[0-9a-f]{64}$'),
    verdict boolean not null,
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, aspect, model, prompt_version, definition_hash),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.aspect_verdict is
    'The judge''s yes/no on an aspect for an answer. definition_hash = ragsql.text_hash(the aspect''s definition '
    'when judged): after the definition changes, old verdicts no longer count.';

create table if not exists ragsql.citation_verdict (
    run_id bigint not null,
    query_id bigint not null,
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    sentence_no integer not null check (sentence_no >= 1),
    citation_no integer not null check (citation_no >= 0),
    sentence text not null,
    docno text,
    supports boolean,
    reason text,
    call_id bigint references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, model, prompt_version, sentence_no, citation_no),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade,
    check ((citation_no = 0) = (docno is null) and (docno is null) = (supports is null))
);
comment on table ragsql.citation_verdict is
    'Citations of each answer sentence (seed retrieval-metrics 5.1): citation_no 0 (docno and supports null) '
    'marks a sentence without citation; citation_no >= 1 is one cited docno and whether that item supports '
    'the sentence (a docno not among the contexts does not). call_id is null where no call was needed: a '
    'sentence without citation, a citation of an item that is not among the answer''s contexts.';

create table if not exists ragsql.generation_metric (
    metric text primary key,
    position integer not null unique,
    task_kind text not null,
    needs_reference boolean not null,
    description text not null
);
comment on table ragsql.generation_metric is
    'Generation metrics (RAGAS spelling) in report order, the judge task kind whose verdicts feed each, and '
    'whether it needs a reference answer. Aspect critique adds one metric per aspect, spelled aspect:<name>.';

insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description)
values
    ('faithfulness', 1, 'faithfulness', false,
     'answer statements supported by the contexts / answer statements'),
    ('contradiction_rate', 2, 'faithfulness', false,
     'answer statements contradicted by the contexts / answer statements'),
    ('answer_relevancy', 3, 'answer_relevancy', false,
     'mean cosine of generated questions to the question; 0 if the answer is non-committal (RAGAS)'),
    ('answer_relevancy_rating', 4, 'answer_relevancy_rating', false,
     '(judge score 1-5 - 1) / 4; one more call per answer, so judged only when asked for'),
    ('answer_relevancy_cosine', 5, 'answer_relevancy', false, 'cosine of question and answer embeddings'),
    ('context_precision', 6, 'context_precision', false,
     'ContextPrecision over the contexts with the judge''s usefulness verdicts as rel_i'),
    ('context_relevance', 7, 'context_relevance', false,
     'context sentences relevant to the question / context sentences'),
    ('context_recall', 8, 'context_recall', true,
     'reference statements supported by the contexts / reference statements'),
    ('answer_similarity', 9, 'answer_similarity', true, 'mean over reference answers of cosine(answer, reference)'),
    ('answer_correctness_f1', 10, 'answer_correctness', true, 'TP / (TP + (FP + FN) / 2), 0 when TP = 0'),
    ('answer_correctness', 11, 'answer_correctness', true,
     '(w_f * F1 + w_s * answer_similarity) / (w_f + w_s), default w_f = 0.75, w_s = 0.25'),
    ('citation_coverage', 12, 'citations', false, 'answer sentences with a citation / answer sentences'),
    ('citation_validity', 13, 'citations', false, 'citations whose cited item supports the sentence / citations')
on conflict (metric) do nothing;

create table if not exists ragsql.judge_task (
    id bigint generated always as identity primary key,
    run_id bigint not null,
    query_id bigint not null,
    kind text not null check (kind ~ '^[a-z][a-z0-9_]*$'),
    status text not null default 'pending' check (status in ('pending', 'running', 'done', 'failed')),
    attempts integer not null default 0 check (attempts >= 0),
    lease_until timestamptz,
    worker text,
    last_error text,
    judge text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    unique (run_id, query_id, kind),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade,
    check ((status = 'running') = (lease_until is not null))
);
comment on table ragsql.judge_task is
    'Work queue of the judge: one task per (run, query, kind). Workers claim pending tasks and tasks whose '
    'lease expired with ragsql._claim_judge_tasks (for update skip locked) and close them with '
    'ragsql._finish_judge_task in the transaction that stores the verdicts. last_error says why a failed '
    'task''s metrics are null; judge names the judge model and embedder that closed it, so judging again with '
    'another one repeats the task.';

create index if not exists judge_task_open
    on ragsql.judge_task (run_id, id) where status in ('pending', 'running');

insert into ragsql.schema_migration (name) values ('0020_judge') on conflict do nothing;
