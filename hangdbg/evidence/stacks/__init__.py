"""Evidence kind ``stacks``/``stack-text``: py-spy dump texts and ``dump -o`` directories
(``reader.py``), gdb/pstack/lldb/faulthandler texts (``text_reader.py``); the grammars and the
analysis are :mod:`hangdbg.stacks`."""
