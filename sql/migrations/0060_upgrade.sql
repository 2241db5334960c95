-- Objects of earlier releases that this one no longer has. Since migrations run once (install.sql's \if,
-- ragsql db init's ledger check), a function removed from sql/functions/ is dropped here, or it would stay
-- in every database installed before.

-- replaced by ragsql._bm25_scores (the lower bound and the final top k share one scoring function)
drop function if exists ragsql._bm25_kth(ragsql.corpus_version, text[], float8[], integer[], integer);

insert into ragsql.schema_migration (name) values ('0060_upgrade') on conflict do nothing;
