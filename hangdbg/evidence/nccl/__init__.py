"""Evidence kind ``nccl``: NCCL_DEBUG logs: grammar, records, the fast scan (and its optional C
extension), analysis, causes, op mismatches, split, facts, reader."""
