"""Transport: what a command targets (``targets.py``: ``TargetSpec``), the runners that reach nodes
(srun, pdsh, ssh, local), the wire frames, host lists, SLURM."""
