"""Evidence kind ``flight-recorder``: PyTorch flight-recorder dumps (JSON, pickle) and ``fr_trace``
text: grammar, analysis, facts, reader."""
