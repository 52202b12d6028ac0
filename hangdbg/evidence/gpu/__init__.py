"""Evidence kind ``gpu``: kernel logs with NVIDIA Xid lines and ``nvidia-smi -q``: grammar, Xid
codes, analysis, facts, reader."""
