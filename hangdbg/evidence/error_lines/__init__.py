"""Every error-looking line of any text log, read with the error catalog (:mod:`hangdbg.catalog`):
grammar (lines to events), analysis (first failure, echoes, unrecognised lines), facts, reader."""
