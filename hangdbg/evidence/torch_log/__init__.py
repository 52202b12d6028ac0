"""Evidence kind ``torch-log``: PyTorch watchdog, desync and torchrun logs, torchelastic
``error.json``: grammar, messages, analysis, SeqNum reasoning, facts, reader."""
