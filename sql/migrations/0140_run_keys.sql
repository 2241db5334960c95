-- Keys of run-scoped tables lead with run_id (issue 17): a table distributed by run_id on Citus may only have
-- unique constraints that include run_id, and a task is then found by (run_id, id) on one shard. On one server
-- the key serves the same lookups: every function of the judge queue passes the run with the task id.

do $$
begin
    if not exists (select from ragsql.schema_migration where name = '0140_run_keys') then
        alter table ragsql.judge_task
            drop constraint judge_task_pkey,
            add constraint judge_task_pkey primary key (run_id, id);
    end if;
end
$$;

insert into ragsql.schema_migration (name) values ('0140_run_keys') on conflict do nothing;
