"""Stacks: the py-spy, saved and native stack grammars and the whole stack analysis
(``analysis.analyze``: equivalence classes, places, wait states, the wait-for graph, suspects, the
merged tree)."""
