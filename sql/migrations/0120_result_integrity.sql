-- ragsql.run_result's foreign keys to run and query become statement triggers (issue 15): a foreign key checks
-- each inserted row with a query of its own, two thirds of the time a 1M-row run took to store (19 s of 30 s in
-- EXPLAIN ANALYZE), where the triggers check the keys a statement's rows name in one pass (0.4 s) and keep every
-- rule the keys kept. The trigger functions are in sql/functions/00_triggers.sql.

alter table ragsql.run_result drop constraint if exists run_result_run_id_dataset_id_fkey;
alter table ragsql.run_result drop constraint if exists run_result_dataset_id_query_id_fkey;

create or replace trigger run_result_check_ins after insert on ragsql.run_result
    referencing new table as added for each statement execute function ragsql._run_result_check();
create or replace trigger run_result_check_upd after update on ragsql.run_result
    referencing new table as added for each statement execute function ragsql._run_result_check();
create or replace trigger run_results_cascade_del after delete on ragsql.run
    referencing old table as gone for each statement execute function ragsql._run_result_cascade();
create or replace trigger query_results_cascade_del after delete on ragsql.query
    referencing old table as gone for each statement execute function ragsql._run_result_cascade();
create or replace trigger run_results_keep_key_upd after update of id, dataset_id on ragsql.run
    for each row when (old.id is distinct from new.id or old.dataset_id is distinct from new.dataset_id)
    execute function ragsql._run_result_keep_key();
create or replace trigger query_results_keep_key_upd after update of id, dataset_id on ragsql.query
    for each row when (old.id is distinct from new.id or old.dataset_id is distinct from new.dataset_id)
    execute function ragsql._run_result_keep_key();
create or replace trigger run_results_check_trunc after truncate on ragsql.run
    for each statement execute function ragsql._run_result_truncated();
create or replace trigger query_results_check_trunc after truncate on ragsql.query
    for each statement execute function ragsql._run_result_truncated();

comment on table ragsql.run_result is
    'Ranked retrieval results of a run: rank 1 is the top item. Imported TREC runs are ranked as trec_eval '
    'ranks them (score desc, ties by docno desc in byte order). (run_id, dataset_id) names a run and '
    '(dataset_id, query_id) a query of the same dataset, kept by statement triggers rather than foreign keys '
    '(ragsql._run_result_check, _run_result_cascade, _run_result_keep_key, _run_result_truncated).';

insert into ragsql.schema_migration (name) values ('0120_result_integrity') on conflict do nothing;
