"""Drivers of the external programs hangdbg runs: py-spy, gdb, pystack, and the child-process
plumbing they share (own session, killed as a group on timeout, logged with ``-v``).

Above the ground floor (``model``, ``errors``) and below everything else, so that the readers
(``hangdbg.evidence``) and the collectors (``hangdbg.collect``) can both use them.
"""
