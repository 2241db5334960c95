-- ragsql: install or upgrade the whole schema with plain psql, no Python needed.
--   psql -v ON_ERROR_STOP=1 -f sql/install.sql "$DATABASE_URL"
-- Functions, views and grants are idempotent and applied every time; a migration runs once: the
-- \if around it skips one that ragsql.schema_migration records. The last step records the version
-- and fingerprint (sha256 of these files and citus.sql; a test keeps the value true), so that ragsql commands know
-- the database is current. `ragsql db init` applies the same files, in this order (it reads the \ir
-- lines and skips recorded migrations itself).
-- pgvector is not a trusted extension: a non-superuser needs a DBA to run
-- `create extension vector;` in the database first.
\set ON_ERROR_STOP 1
begin;
\ir 000_bootstrap.sql
\ir functions/00_triggers.sql
select not exists (select from ragsql.schema_migration where name = '0010_core') as migrate \gset
\if :migrate
\ir migrations/0010_core.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0020_judge') as migrate \gset
\if :migrate
\ir migrations/0020_judge.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0030_corpus') as migrate \gset
\if :migrate
\ir migrations/0030_corpus.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0040_bm25') as migrate \gset
\if :migrate
\ir migrations/0040_bm25.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0050_bm25_lists') as migrate \gset
\if :migrate
\ir migrations/0050_bm25_lists.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0060_upgrade') as migrate \gset
\if :migrate
\ir migrations/0060_upgrade.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0070_call_claim') as migrate \gset
\if :migrate
\ir migrations/0070_call_claim.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0080_direction') as migrate \gset
\if :migrate
\ir migrations/0080_direction.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0090_review') as migrate \gset
\if :migrate
\ir migrations/0090_review.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0100_text_metrics') as migrate \gset
\if :migrate
\ir migrations/0100_text_metrics.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0110_context_id_metrics') as migrate \gset
\if :migrate
\ir migrations/0110_context_id_metrics.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0120_result_integrity') as migrate \gset
\if :migrate
\ir migrations/0120_result_integrity.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0130_ragas_metrics') as migrate \gset
\if :migrate
\ir migrations/0130_ragas_metrics.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0140_run_keys') as migrate \gset
\if :migrate
\ir migrations/0140_run_keys.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0150_ingest_fast') as migrate \gset
\if :migrate
\ir migrations/0150_ingest_fast.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0160_run_result_partitions') as migrate \gset
\if :migrate
\ir migrations/0160_run_result_partitions.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0170_run_owned_choices') as migrate \gset
\if :migrate
\ir migrations/0170_run_owned_choices.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0180_yes_no_verdict') as migrate \gset
\if :migrate
\ir migrations/0180_yes_no_verdict.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0190_context_ids_only') as migrate \gset
\if :migrate
\ir migrations/0190_context_ids_only.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0191_watch') as migrate \gset
\if :migrate
\ir migrations/0191_watch.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0192_answer_without_response') as migrate \gset
\if :migrate
\ir migrations/0192_answer_without_response.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0195_watch_budget_keep') as migrate \gset
\if :migrate
\ir migrations/0195_watch_budget_keep.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0196_watch_retrieved') as migrate \gset
\if :migrate
\ir migrations/0196_watch_retrieved.sql
\endif
select not exists (select from ragsql.schema_migration where name = '0199_run_calls') as migrate \gset
\if :migrate
\ir migrations/0199_run_calls.sql
\endif
\ir functions/05_corpus.sql
\ir functions/09_measure_registry.sql
\ir functions/10_measure.sql
\ir functions/12_gold.sql
\ir functions/15_python_text.sql
\ir functions/20_generation.sql
\ir functions/21_statement_metrics.sql
\ir functions/22_answer_metrics.sql
\ir functions/23_context_metrics.sql
\ir functions/24_generation_api.sql
\ir functions/25_judge_queue.sql
\ir functions/26_text_metrics.sql
\ir functions/27_ragas_metrics.sql
\ir functions/28_yes_no.sql
\ir functions/29_metric_registry.sql
\ir functions/30_retrieval.sql
\ir functions/32_fusion.sql
\ir functions/35_maintenance.sql
\ir functions/40_diagnostics.sql
\ir functions/50_compare.sql
\ir functions/55_check.sql
\ir functions/60_review.sql
\ir functions/65_consistency.sql
\ir functions/70_watch.sql
\ir views/10_retrieval.sql
\ir views/20_generation.sql
\ir views/30_decisions.sql
\ir views/70_watch.sql
\ir views/90_report.sql
\ir 998_jit.sql
\ir 999_grants.sql
\set ragsql_version 0.1.0
\set ragsql_fingerprint a75ec72f6321089108b9737197612c34b160a8fbe72f6a22766c807b462f58cf
call ragsql._record_install(:'ragsql_version', :'ragsql_fingerprint');
commit;
