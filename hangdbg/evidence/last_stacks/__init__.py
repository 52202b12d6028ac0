"""Evidence kind ``last-stacks``: each rank's latest stack samples that ``hangdbg watch --keep-last``
keeps under ``OUT/last/`` (the format: ``ring.py``; the reader: ``reader.py``)."""
