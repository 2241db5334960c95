def test_schema_installed(db):
    """The template database carries the ragsql schema and its default measures."""
    assert db.execute("select count(*) from ragsql.default_measure").fetchone()[0] == 14
