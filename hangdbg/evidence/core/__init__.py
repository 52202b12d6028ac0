"""Evidence kind ``core``/``core-json``: ELF core files read with gdb and pystack (``reader.py``),
the documents of ``hangdbg core`` (``json_reader.py``)."""
