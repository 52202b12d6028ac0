"""Real faults for `hangdbg check` tests, injected from outside hangdbg (standard library only).

* :func:`stop_at_all_reduce`: a directory with a ``sitecustomize.py`` that makes the diagnostics
  rank of one slot (``HANGDBG_CHECK_SLOT``) send itself SIGSTOP when it first calls
  ``torch.distributed.all_reduce``: a rank that hangs in a collective, for real (state T); with
  ``once``, only in the first run (an intermittent fault).
  Put the directory on ``PYTHONPATH`` (for every rank, or through :func:`node_python` for one node).
* :func:`node_python`: a ``--remote-python`` wrapper that applies a fault to one node only (the
  node is ``SLURMD_NODENAME`` under srun, or the ``--node-name`` argument over ssh/pdsh):
  environment variables (``GLOO_SOCKET_IFNAME=bogus0``: a rank that cannot bind its interface),
  and/or a network namespace of its own (``unshare --net``, loopback up): from there the
  rendezvous on the other nodes' 127.0.0.1 is unreachable (connection refused), while the node
  alone still works.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["stop_at_all_reduce", "node_python"]

_SITE = '''\
import os, signal, sys, threading, time
if os.environ.get("HANGDBG_CHECK_SLOT") == {slot!r}:
    def _arm():
        while True:
            mod = sys.modules.get("torch.distributed")
            if mod is not None and hasattr(mod, "all_reduce") and hasattr(mod, "init_process_group"):
                break
            time.sleep(0.005)
        real = mod.all_reduce

        def all_reduce(*args, **kwargs):
            once = {once!r}
            if once:  # the first rank to get here stops; every later run passes (an intermittent fault)
                try:
                    os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                except FileExistsError:
                    return real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGSTOP)
            return real(*args, **kwargs)

        mod.all_reduce = all_reduce
    threading.Thread(target=_arm, daemon=True).start()
'''


def stop_at_all_reduce(directory: Path, slot: int, once: Path | None = None) -> Path:
    """Write ``directory/sitecustomize.py`` (see the module docstring); returns ``directory``.
    ``once``: a file the stopping rank creates (O_EXCL): only the first run's rank stops, later
    runs pass: an intermittent fault."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_SITE.format(slot=str(slot), once=str(once) if once else ""))
    return directory


def node_python(path: Path, node: str, env: dict[str, str] | None = None, netns: bool = False,
                python: str = sys.executable) -> Path:
    """Write an executable wrapper of ``python`` at ``path`` that, on ``node`` only, exports
    ``env`` and (``netns``) runs in a network namespace of its own."""
    exports = "\n".join(f"  export {k}={shlex.quote(v)}" for k, v in (env or {}).items())
    run = (f"  exec unshare --net sh -c 'ip link set lo up && exec \"$0\" \"$@\"' {shlex.quote(python)} \"$@\""
           if netns else f"  exec {shlex.quote(python)} \"$@\"")
    path.write_text(f"""#!/bin/sh
node="${{SLURMD_NODENAME:-}}"
prev=""
for a in "$@"; do
  [ "$prev" = "--node-name" ] && node="$a"
  prev="$a"
done
if [ "$node" = {shlex.quote(node)} ]; then
{exports or '  :'}
{run}
fi
exec {shlex.quote(python)} "$@"
""")
    path.chmod(0o755)
    return path
