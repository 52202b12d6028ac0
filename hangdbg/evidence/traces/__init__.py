"""Evidence kind ``traces``: the per-rank files of the ``tracer`` package: grammar, facts,
reader."""
