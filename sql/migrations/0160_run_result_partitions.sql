-- ragsql.run_result becomes a table partitioned by list of run_id (issue 15): `ragsql import trec` copies a run
-- into a table of its own with no index (ragsql._run_result_bare), builds the two indexes once the rows are in and
-- attaches the table as the run's partition (ragsql._run_result_attach). Keeping the two btree indexes up to date
-- row by row was most of what a 1M-row import cost (7.3 CPU s of COPY against 1.1 s without them). Every other
-- writer (retrieval, fusion, JSONL/CSV imports, SQL by hand) inserts into ragsql.run_result as before: those rows,
-- and every row stored before this migration, go to the default partition ragsql.run_result_default (the table
-- as it was, attached whole: no row is moved). Every metric query names `run_id = <id>`, so it reads one partition.
-- Deleting a run drops its partition (ragsql._run_result_cascade).
-- On a Citus coordinator the table stays as it is (sql/citus.sql hash-distributes it by run_id, and the import
-- takes its ordinary path there).

do $$
begin
    if exists (select from pg_extension where extname = 'citus')
       or (select c.relkind from pg_class as c where c.oid = 'ragsql.run_result'::regclass) = 'p' then
        return;
    end if;
    alter table ragsql.run_result rename to run_result_default;
    alter index ragsql.run_result_pkey rename to run_result_default_pkey;
    alter index ragsql.run_result_run_id_query_id_docno_rank_key rename to run_result_default_run_id_query_id_docno_rank_key;
    drop trigger if exists run_result_check_ins on ragsql.run_result_default;
    drop trigger if exists run_result_check_upd on ragsql.run_result_default;

    create table ragsql.run_result (
        run_id bigint not null,
        dataset_id bigint not null,
        query_id bigint not null,
        rank integer not null constraint run_result_rank_check check (rank >= 1),
        docno text not null constraint run_result_docno_check check (docno <> ''),
        score float8,
        text text,
        primary key (run_id, query_id, rank),
        unique (run_id, query_id, docno) include (rank)
    ) partition by list (run_id);
    -- the old table's indexes and checks match the new ones (their names too): it is attached as it is, no scan
    alter table ragsql.run_result attach partition ragsql.run_result_default default;
    comment on table ragsql.run_result_default is
        'The rows of ragsql.run_result whose run has no partition of its own (all but imported TREC runs).';

    create trigger run_result_check_ins after insert on ragsql.run_result
        referencing new table as added for each statement execute function ragsql._run_result_check();
    create trigger run_result_check_upd after update on ragsql.run_result
        referencing new table as added for each statement execute function ragsql._run_result_check();
end
$$;

comment on table ragsql.run_result is
    'Ranked retrieval results of a run: rank 1 is the top item. Imported TREC runs are ranked as trec_eval '
    'ranks them (score desc, ties by docno desc in byte order). (run_id, dataset_id) names a run and '
    '(dataset_id, query_id) a query of the same dataset, kept by statement triggers rather than foreign keys '
    '(ragsql._run_result_check, _run_result_cascade, _run_result_keep_key, _run_result_truncated). On one server, '
    'partitioned by list of run_id: a run imported by `ragsql import trec` has a partition of its own '
    '(run_result_r<run id>, ragsql._run_result_attach), every other run''s rows are in run_result_default.';

insert into ragsql.schema_migration (name) values ('0160_run_result_partitions') on conflict do nothing;
