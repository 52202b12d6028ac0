"""Evidence kind ``nccl-ras``: NCCL RAS reports (text and JSON): grammar, analysis, facts,
reader."""
