-- Who may do what. Two nologin group roles, created where the installing user may create roles (a DBA
-- grants them to login users: see the README); the owner of schema ragsql installs and upgrades.
--
--   ragsql_reader  metrics, diagnostics and comparisons through schema ragsql_report (sql/views/90_report.sql);
--                  select on the columns of ragsql's tables that hold no raw text, and on judge_usage and run_usage.
--                  Raw text, which it may not read: documents and chunks (title, text, metadata, embeddings,
--                  BM25 terms), retrieved text, answers, contexts, reference answers, gold passages and
--                  quotes, statements, and whatever a judge wrote (judge_call.response, reasons, sentences,
--                  generated questions, their embeddings). Questions (query.text) are not raw.
--   ragsql_writer  load, ingest, retrieve, generate and judge: select, insert, update, delete on every table
--                  but the install ledger, its sequences, and maintain (analyze) where the server has it
--                  (PostgreSQL 17+); no DDL; execute on ragsql's functions.
--                  The few steps that need the owner (BM25, postings and run_result partitions, HNSW and trigram
--                  indexes) are security definer functions, executable by ragsql_writer only.
-- PUBLIC may execute no function of ragsql or ragsql_report, and create in none of ragsql's schemas: a security
-- definer function pins search_path to pg_catalog and pg_temp (test_definer_safety.py keeps all of this true).
--
-- Every install revokes and grants again, so a release that narrows a grant reaches every database.
-- On a Citus coordinator a role must exist on every worker too, or each grant below fails there. Citus sends
-- CREATE ROLE to the workers only from a database with the citus extension: a role an earlier install created
-- from a database without it (on the same server) is on the coordinator alone, and is created on the workers here.
do $$
declare
    may_create boolean := (select rolcreaterole or rolsuper from pg_roles where rolname = current_user);
    citus boolean := exists (select from pg_extension where extname = 'citus');
    r text;
    node record;
begin
    foreach r in array array['ragsql_reader', 'ragsql_writer'] loop
        if not exists (select from pg_roles where rolname = r) then
            if may_create then
                execute format('create role %I nologin', r);
            else
                raise warning 'role % not created: % may not create roles (a DBA can: create role % nologin; '
                             'then run the install again)', r, current_user, r;
            end if;
        elsif citus and may_create then
            -- on each worker, without propagation (a worker with Citus metadata would send it back to the
            -- coordinator, where the role exists); the result of run_command_on_workers is checked per node
            for node in
                select * from run_command_on_workers(format(
                    'do $w$ begin if not exists (select from pg_roles where rolname = %1$L) then '
                    'perform set_config(''citus.enable_ddl_propagation'', ''off'', true); '
                    'create role %1$I nologin; end if; end $w$', r))
            loop
                if not node.success then
                    raise exception 'role % not created on Citus worker %:%: %', r, node.nodename, node.nodeport,
                        node.result;
                end if;
            end loop;
        end if;
    end loop;
end
$$;

-- The wrappers of schema ragsql_report and the security definer functions of ragsql run with their owner's
-- rights: only the two roles may call the former and writers the latter. A new function is executable by PUBLIC
-- until this runs again: every install revokes on all of them.
revoke create on schema ragsql, ragsql_report, ragsql_intarray from public;
revoke all on all routines in schema ragsql, ragsql_report from public;

do $$
declare
    t record;
    cols text;
    -- table.column of raw text (see above), and tables a reader has no use for
    raw text[] := array[
        'judge_call.response',
        'document.title', 'document.text', 'document.metadata', 'chunk.text', 'chunk.embedding',
        'run_result.text', 'answer.text', 'answer_context.text', 'reference_answer.text',
        'judgment.text', 'gold_span.quote', 'text_statement.statement',
        'statement_verdict.reason', 'context_verdict.reason', 'rating.reason', 'aspect_verdict.reason',
        'citation_verdict.reason', 'citation_verdict.sentence', 'context_sentence_verdict.sentence',
        'generated_question.question', 'text_embedding.embedding', 'entity_extraction.entities',
        'graded_verdict.reason', 'rubric_verdict.reason', 'yes_no_verdict.reason'];
    hidden text[] := array['chunk_term', 'bm25_term', 'bm25_list'];
begin
    -- revoked first from both, so that every install leaves the same privileges, in the same order
    if exists (select from pg_roles where rolname = 'ragsql_writer') then
        revoke all on all tables in schema ragsql from ragsql_writer;
        revoke all on all routines in schema ragsql from ragsql_writer;
        revoke create on schema ragsql, ragsql_report, ragsql_intarray from ragsql_writer;
    end if;
    if exists (select from pg_roles where rolname = 'ragsql_reader') then
        revoke all on all tables in schema ragsql from ragsql_reader;
        revoke all on all routines in schema ragsql from ragsql_reader;
        revoke create on schema ragsql, ragsql_report from ragsql_reader;
        revoke all on schema ragsql_intarray from ragsql_reader;
        grant usage on schema ragsql, ragsql_report to ragsql_reader;
        grant execute on all functions in schema ragsql_report to ragsql_reader;
        grant select on all tables in schema ragsql_report to ragsql_reader;
        for t in
            select c.oid, c.relname
            from pg_class as c
            where c.relnamespace = 'ragsql'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
              and c.relname <> all (hidden)
            order by c.relname
        loop
            select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into cols
            from pg_attribute as a
            where a.attrelid = t.oid and a.attnum > 0 and not a.attisdropped
              and t.relname || '.' || a.attname <> all (raw);
            execute format('grant select (%s) on ragsql.%I to ragsql_reader', cols, t.relname);
        end loop;
        grant select on ragsql.judge_usage, ragsql.run_usage to ragsql_reader;
    end if;
    if exists (select from pg_roles where rolname = 'ragsql_writer') then
        grant usage on schema ragsql, ragsql_intarray, ragsql_report to ragsql_writer;
        grant execute on all functions in schema ragsql_report to ragsql_writer;
        grant select on all tables in schema ragsql_report to ragsql_writer;
        -- the CLI's import, ingest, retrieve, generate and judge (the owner-only steps included), not the
        -- install's procedure
        grant execute on all functions in schema ragsql to ragsql_writer;
        grant select, insert, update, delete on all tables in schema ragsql to ragsql_writer;
        revoke insert, update, delete on ragsql.schema_migration, ragsql.schema_install from ragsql_writer;
        grant usage, select on all sequences in schema ragsql to ragsql_writer;
        if current_setting('server_version_num')::int >= 170000 then
            execute 'grant maintain on all tables in schema ragsql to ragsql_writer';
        end if;
    end if;
end
$$;
