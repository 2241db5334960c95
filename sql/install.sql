-- ragsql: install or upgrade the whole schema with plain psql, no Python needed.
--   psql -v ON_ERROR_STOP=1 -f sql/install.sql "$DATABASE_URL"
-- Every file below is idempotent, so running this again changes nothing.
-- `ragsql db init` applies the same files, in this order (it reads the \ir lines).
-- pgvector is not a trusted extension: a non-superuser needs a DBA to run
-- `create extension vector;` in the database first.
\set ON_ERROR_STOP 1
begin;
\ir 000_bootstrap.sql
\ir migrations/0010_core.sql
\ir migrations/0020_judge.sql
\ir migrations/0030_corpus.sql
\ir migrations/0040_bm25.sql
\ir migrations/0050_bm25_lists.sql
\ir migrations/0070_call_claim.sql
\ir functions/05_corpus.sql
\ir functions/10_measure.sql
\ir functions/20_generation.sql
\ir functions/21_statement_metrics.sql
\ir functions/22_answer_metrics.sql
\ir functions/23_context_metrics.sql
\ir functions/24_generation_api.sql
\ir functions/25_judge_queue.sql
\ir functions/30_retrieval.sql
\ir functions/40_diagnostics.sql
\ir views/10_retrieval.sql
\ir views/20_generation.sql
\ir 999_grants.sql
commit;
