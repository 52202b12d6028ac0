"""Shared line utilities: regular-file input, line iteration with caps, directory walks
(``lines.py``), bounded JSON (``jsondoc.py``)."""
