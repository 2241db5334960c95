-- Written by `python -m ragsql.registry_files` from ragsql/registry.py: edit that, not this file.

-- The retrieval measures ragsql.evaluate computes (its formulas: ragsql._evaluate in 10_measure.sql), each with the
-- parameters it takes: cutoff (required, optional: the whole ranking without one, none), rel=<grade>, p=<persistence>
-- with its default; count: the run value sums the queries' values.
create or replace function ragsql._measure_family()
returns table (family text, cutoff text, takes_rel boolean, default_p float8, is_count boolean)
language sql immutable parallel safe
as $$
    select * from (values
        ('Success', 'optional', true, null::float8, false),
        ('R', 'optional', true, null::float8, false),
        ('P', 'required', true, null::float8, false),
        ('RR', 'optional', true, null::float8, false),
        ('nDCG', 'optional', false, null::float8, false),
        ('nDCG_burges', 'optional', false, null::float8, false),
        ('AP', 'optional', true, null::float8, false),
        ('ContextPrecision', 'optional', true, null::float8, false),
        ('Rprec', 'none', true, null::float8, false),
        ('F1', 'required', true, null::float8, false),
        ('Bpref', 'none', true, null::float8, false),
        ('infAP', 'none', true, null::float8, false),
        ('ERR', 'optional', false, null::float8, false),
        ('RBP', 'optional', true, 0.8::float8, false),
        ('Judged', 'optional', false, null::float8, false),
        ('NumRet', 'none', true, null::float8, true),
        ('NumRel', 'none', true, null::float8, true),
        ('NumRelRet', 'none', true, null::float8, true)
    ) as f(family, cutoff, takes_rel, default_p, is_count)
$$;
comment on function ragsql._measure_family() is
    'The retrieval measure families, as ragsql/registry.py declares them: the parameters each takes.';

-- The spellings trec_eval and ranx users type (lower case): with_k when the pattern's group is the cutoff.
create or replace function ragsql._measure_spelling()
returns table (pattern text, with_k boolean, family text)
language sql immutable parallel safe
as $$
    select * from (values
        ('^success[_.]([0-9]+)$', true, 'Success'),
        ('^hit_rate@([0-9]+)$', true, 'Success'),
        ('^hit_rate$', false, 'Success'),
        ('^recall[_.]([0-9]+)$', true, 'R'),
        ('^recall@([0-9]+)$', true, 'R'),
        ('^p[_.]([0-9]+)$', true, 'P'),
        ('^precision@([0-9]+)$', true, 'P'),
        ('^mrr@([0-9]+)$', true, 'RR'),
        ('^mrr$', false, 'RR'),
        ('^recip_rank$', false, 'RR'),
        ('^ndcg_cut[_.]([0-9]+)$', true, 'nDCG'),
        ('^ndcg@([0-9]+)$', true, 'nDCG'),
        ('^ndcg$', false, 'nDCG'),
        ('^ndcg_burges@([0-9]+)$', true, 'nDCG_burges'),
        ('^map_cut[_.]([0-9]+)$', true, 'AP'),
        ('^map@([0-9]+)$', true, 'AP'),
        ('^map$', false, 'AP'),
        ('^r-precision$', false, 'Rprec'),
        ('^r_precision$', false, 'Rprec'),
        ('^num_ret$', false, 'NumRet'),
        ('^num_rel$', false, 'NumRel'),
        ('^num_rel_ret$', false, 'NumRelRet')
    ) as a(pattern, with_k, family)
$$;
comment on function ragsql._measure_spelling() is
    'Other spellings of the retrieval measures (regular expressions over the lower-cased name; the group is the '
    'cutoff where with_k), as ragsql/registry.py declares them.';
