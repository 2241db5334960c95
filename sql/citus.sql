-- ragsql on Citus (distributed PostgreSQL): distribute the schema that install.sql created. A DBA runs, on the
-- coordinator, after install.sql (and again after every upgrade; running it twice changes nothing):
--   psql -v ON_ERROR_STOP=1 -f sql/install.sql "$DATABASE_URL"
--   psql -v ON_ERROR_STOP=1 -f sql/citus.sql "$DATABASE_URL"
-- `ragsql db init --distribute` does the same. Layout (README, "Scale out on Citus"):
--   * run-scoped tables (a run's results, answers, contexts, verdicts, judge tasks, review labels, retrieval
--     records, the places taken of its call budget) are hash-distributed by run_id and co-located: everything
--     about one run lives on one shard group, so the queries of one run are single-shard (router) queries;
--   * dataset-scoped and small tables (datasets, queries, judgments, references, runs, catalogues, the judge call
--     cache with its claims on requests in flight, extracted statements, watches and their windows) are reference tables: a copy on every node, joined locally with any shard;
--   * the corpus (documents, chunks, postings, BM25 lists) and the install ledgers stay local on the coordinator:
--     a corpus is searched whole by every query, its postings and BM25 lists are list-partitioned per version and
--     kept fresh by triggers, none of which Citus allows on a reference table, and retrieval writes its ranked rows
--     into the distributed run_result with one insert … select.
-- Order matters: foreign keys from run-scoped tables are dropped first (else making the dataset tables reference
-- tables turns the run tables into Citus local tables), then the reference tables, then the distributed tables,
-- then the foreign keys come back. run_result's references to run and query are statement triggers on one
-- server (migration 0120; Citus allows no trigger on a reference table): here they become the foreign keys they
-- replaced, which Citus checks on each shard against the local copy of the reference table.
-- Plain SQL (no psql meta-commands): ragsql db init --distribute sends this file as is.

do $$
declare
    reference_tables text[] := array[
        'dataset', 'query', 'judgment', 'reference_answer', 'gold_span', 'run', 'default_measure', 'aspect',
        'generation_metric', 'judge_call', 'judge_call_claim', 'statement_extraction', 'text_statement', 'text_embedding',
        'entity_extraction', 'rubric', 'watch', 'watch_window'];
    -- the first one anchors the co-location group
    run_tables text[] := array[
        'answer', 'run_result', 'answer_context', 'statement_verdict', 'context_verdict',
        'context_sentence_verdict', 'generated_question', 'rating', 'aspect_verdict', 'citation_verdict',
        'judge_task', 'retrieval_run', 'retrieval_query', 'review_label', 'statement_attribution', 'graded_verdict',
        'rubric_verdict', 'run_embedder', 'yes_no_verdict', 'run_calls'];
    t text;
    fk record;
    trg record;
    saved jsonb := '[]';
    grant_ record;
begin
    if not exists (select from pg_extension where extname = 'citus') then
        raise exception 'the citus extension is not installed in this database'
            using errcode = 'feature_not_supported',
                  hint = 'sql/citus.sql distributes ragsql on a Citus coordinator; one server needs only install.sql';
    end if;
    perform pg_advisory_xact_lock(hashtext('ragsql.install'));
    -- foreign keys to reference tables need one connection per node for the whole transaction
    set local citus.multi_shard_modify_mode to 'sequential';
    set local client_min_messages to warning;
    if to_regclass('ragsql.run_result') is null then
        raise exception 'ragsql is not installed in this database'
            using errcode = 'undefined_table', hint = 'apply sql/install.sql first';
    end if;
    -- migration 0160 partitions run_result by run only where the citus extension was not there at install time:
    -- such a table (a database of one server that becomes a coordinator) is made one plain table again, with its
    -- rows, indexes, checks, comment and grants, and distributed below like any other
    if (select c.relkind from pg_class as c where c.oid = 'ragsql.run_result'::regclass) = 'p'
       and not exists (select from pg_dist_partition where logicalrelid = 'ragsql.run_result'::regclass) then
        create table ragsql._run_result_plain (like ragsql.run_result including constraints including indexes);
        insert into ragsql._run_result_plain select * from ragsql.run_result;
        for grant_ in
            select format('grant %s on ragsql._run_result_plain to %s', a.privilege_type,
                          case when a.grantee = 0 then 'public' else quote_ident(a.grantee::regrole::text) end) as sql
            from pg_class as c, aclexplode(c.relacl) as a
            where c.oid = 'ragsql.run_result'::regclass and a.grantee <> c.relowner
            union all
            select format('grant %s (%I) on ragsql._run_result_plain to %s', a.privilege_type, t.attname,
                          case when a.grantee = 0 then 'public' else quote_ident(a.grantee::regrole::text) end)
            from pg_attribute as t, aclexplode(t.attacl) as a
            where t.attrelid = 'ragsql.run_result'::regclass and t.attnum > 0 and not t.attisdropped
        loop
            execute grant_.sql;
        end loop;
        execute format('comment on table ragsql._run_result_plain is %L',
                       obj_description('ragsql.run_result'::regclass, 'pg_class'));
        drop table ragsql.run_result;
        alter table ragsql._run_result_plain rename to run_result;
        alter index ragsql._run_result_plain_pkey rename to run_result_pkey;
        alter index ragsql._run_result_plain_run_id_query_id_docno_rank_key
            rename to run_result_run_id_query_id_docno_rank_key;
    end if;

    -- run_result keeps its references by triggers on one server; Citus allows none on reference tables
    for trg in
        select g.tgname, g.tgrelid::regclass::text as tab
        from pg_trigger as g
        where g.tgrelid in ('ragsql.run_result'::regclass, 'ragsql.run'::regclass, 'ragsql.query'::regclass)
          and g.tgname in ('run_result_check_ins', 'run_result_check_upd', 'run_results_cascade_del',
                           'query_results_cascade_del', 'run_results_keep_key_upd', 'query_results_keep_key_upd',
                           'run_results_check_trunc', 'query_results_check_trunc')
    loop
        execute format('drop trigger %I on %s', trg.tgname, trg.tab);
    end loop;

    -- a foreign key from a distributed table to a corpus table on the coordinator is refused: the run's corpus
    -- version stays a plain column (ragsql.retrieval_run.version_id)
    alter table ragsql.retrieval_run drop constraint if exists retrieval_run_version_id_fkey;

    -- every foreign key of a table still to convert, saved and dropped; added back once all are converted
    for fk in
        select c.conrelid::regclass::text as tab, c.conname, pg_get_constraintdef(c.oid) as def
        from pg_constraint as c
        where c.contype = 'f'
          and c.connamespace = 'ragsql'::regnamespace
          and (c.conrelid::regclass::text in (select 'ragsql.' || unnest(reference_tables || run_tables))
               or c.confrelid::regclass::text in (select 'ragsql.' || unnest(reference_tables || run_tables)))
          and (not exists (select from pg_dist_partition as p where p.logicalrelid = c.conrelid)
               or not exists (select from pg_dist_partition as p where p.logicalrelid = c.confrelid))
    loop
        saved := saved || jsonb_build_object('tab', fk.tab, 'name', fk.conname, 'def', fk.def);
        execute format('alter table %s drop constraint %I', fk.tab, fk.conname);
    end loop;

    foreach t in array reference_tables loop
        if not exists (select from pg_dist_partition where logicalrelid = ('ragsql.' || t)::regclass) then
            perform create_reference_table(('ragsql.' || t)::regclass);
            -- the rows were copied to the shards: drop the coordinator's leftover local copy
            perform truncate_local_data_after_distributing_table(('ragsql.' || t)::regclass);
        end if;
    end loop;
    foreach t in array run_tables loop
        if not exists (select from pg_dist_partition where logicalrelid = ('ragsql.' || t)::regclass) then
            perform create_distributed_table(('ragsql.' || t)::regclass, 'run_id',
                                             colocate_with => case when t = run_tables[1] then 'default'
                                                                   else 'ragsql.' || run_tables[1] end);
            perform truncate_local_data_after_distributing_table(('ragsql.' || t)::regclass);
        end if;
    end loop;

    for fk in select * from jsonb_to_recordset(saved) as s(tab text, name text, def text) loop
        execute format('alter table %s add constraint %I %s', fk.tab, fk.name, fk.def);
    end loop;

    -- the references the triggers kept on one server (sql/migrations/0010_core.sql's foreign keys)
    if not exists (select from pg_constraint where conname = 'run_result_run_id_dataset_id_fkey'
                                                and conrelid = 'ragsql.run_result'::regclass) then
        alter table ragsql.run_result add constraint run_result_run_id_dataset_id_fkey
            foreign key (run_id, dataset_id) references ragsql.run (id, dataset_id) on delete cascade;
    end if;
    if not exists (select from pg_constraint where conname = 'run_result_dataset_id_query_id_fkey'
                                                and conrelid = 'ragsql.run_result'::regclass) then
        alter table ragsql.run_result add constraint run_result_dataset_id_query_id_fkey
            foreign key (dataset_id, query_id) references ragsql.query (dataset_id, id) on delete cascade;
    end if;
end
$$;
