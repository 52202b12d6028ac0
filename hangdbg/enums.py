"""The documented string enums of the ground floor (no I/O, imports nothing from the project).

:class:`DocumentedEnum` is the base of every enum of hangdbg's data: its members compare equal to
their string value, serialise to it in JSON, and carry a one-line description (``member.doc``)
that ``hangdbg schema`` shows. :mod:`hangdbg.model` defines the finding kinds, severities and
evidence kinds on it and uses the enums below for the states of its dataclasses: what a finding
is about (:class:`Level`), how a rank's dump went (:class:`DumpState`), where a rank is
(:class:`PlaceKind`; inside an object collective, :class:`ObjectPhase`), what a thread does (:class:`ThreadStatus`) and what became of a node of
the fan-out (:class:`NodeStatus`).
"""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = ["DocumentedEnum", "Level", "DumpState", "PlaceKind", "ObjectPhase", "ThreadStatus", "NodeStatus"]

E = TypeVar("E", bound="DocumentedEnum")
D = TypeVar("D")


class DocumentedEnum(str, enum.Enum):
    """A string enum whose members carry a one-line description (``member.doc``).

    Members compare equal to their string value and serialise to it in JSON.
    """

    doc: str

    def __new__(cls, value: str, doc: str = "") -> "DocumentedEnum":
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        return member

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def read(cls: type[E], value: object, default: D) -> E | D:
        """The member whose value is ``value``, else ``default`` (a member, or None): what a reader
        of text or JSON written elsewhere (another hangdbg version, a garbled file) calls; never
        raises."""
        if not isinstance(value, str):
            return default
        try:
            return cls(value)
        except ValueError:
            return default


class Level(DocumentedEnum):
    """What a finding of a :class:`~hangdbg.model.Kind` is about (``Kind.level``)."""

    RANK = ("rank", "a rank's process: where it is, how it ended, what it printed")
    NODE = ("node", "a host: a node of the fan-out or of the check, its network or its PCIe set-up")
    GPU = ("gpu", "a device: a GPU or its link (Xid, ECC, fell off the bus, stuck in the driver)")
    JOB = ("job", "the launch or the configuration, or several ranks together (mismatched ops, wrong data, a cycle)")
    TOOL = ("tool", "hangdbg's own output (files it could not write)")


class DumpState(DocumentedEnum):
    """How taking one rank's stack went (``RankDump.state``), decided where the dump is made."""

    OK = ("ok", "the stack was taken")
    GONE = ("gone", "the process exited (or is a zombie) while hangdbg looked: a dead rank, not a hung one")
    UNREADABLE = ("unreadable", "the stack could not be taken (permission, a stopped process, a timeout...): the error says why")


class PlaceKind(DocumentedEnum):
    """Where a rank's chosen thread is (``Place.kind``)."""

    COLLECTIVE = ("collective", "inside a torch.distributed / c10d collective (or a p2p op)")
    INIT = ("init", "in init_process_group, a rendezvous, a store barrier or an NCCL communicator creation")
    OUTSIDE = ("outside", "anywhere else: computing, loading data, or in a service thread's wait")
    UNKNOWN = ("unknown", "no stack, or only a library thread's that does not say where (NCCL's proxy, CUDA's events)")


class ObjectPhase(DocumentedEnum):
    """Where a rank is inside an object collective (``Place.phase``): torch.distributed's
    ``all_gather_object``, ``broadcast_object_list``, ``gather_object``, ``scatter_object_list``,
    ``send_object_list`` and ``recv_object_list`` (``distributed_c10d.py``, torch 1.8-2.x) pickle
    their object (``_object_to_tensor``), exchange sizes then bytes, and unpickle (``_tensor_to_object``)."""

    PICKLE = ("pickle", "still serializing its object (user __reduce__/__getstate__ code included): not in the "
                        "collective yet, so the place is `outside`, `collective` naming the object collective")
    EXCHANGE = ("exchange", "in the collective or p2p ops it calls (sizes, then data): the place is `collective`")
    UNPICKLE = ("unpickle", "deserializing what it received: the exchange is done; the place stays `collective`, "
                            "it waits for nobody and nobody in that call waits for it")


class ThreadStatus(DocumentedEnum):
    """What a thread does (``Thread.status``): py-spy's words (``Thread N (idle)``; py-spy >= 0.3
    prints ``idle``, ``active`` and ``active+gil``; older ones ``gil``, read as ``active+gil``),
    which the other stack grammars (gdb, pystack, cores, thread dumps) judge the same way."""

    IDLE = ("idle", "waiting: in a lock, a futex, poll, sleep or read (py-spy: not active)")
    ACTIVE = ("active", "running, without the GIL (or its GIL use is unknown)")
    ACTIVE_GIL = ("active+gil", "running and holding the GIL")
    UNKNOWN = ("unknown", "not known: no native frame to judge by, or a status this hangdbg does not know")


class NodeStatus(DocumentedEnum):
    """What became of one node of the fan-out (``dump --jobid/--hosts``, ``collect``) or of a
    ``check`` trial; :attr:`failed` tells the statuses of a node that could not be read."""

    OK = ("ok", "read: its ranks dumped, its files sent, or its check ranks all ran")
    NO_RANKS = ("no-ranks", "the agent ran and found no rank of the job on the node")
    NOTHING = ("nothing", "collect: none of the files asked for is on the node")
    RANK_FAILED = ("failed", "check: the node ran its ranks and one of them failed a step")
    SETUP = ("setup", "check: the node's ranks do not fit its GPUs (more ranks than visible GPUs with nccl): none was started")
    ERROR = ("error", "the agent, the node's launcher or the transport failed (the reason says how)")
    UNREACHABLE = ("unreachable", "the transport could not reach the node (ssh exit status 255)")
    NO_HANGDBG = ("no-hangdbg", "hangdbg is not installed where the node runs it (--remote-python)")
    TIMEOUT = ("timeout", "no answer within the time allowed")
    NO_ANSWER = ("no-answer", "nothing came back, and the transport said nothing either")

    @property
    def failed(self) -> bool:
        """True when the node could not be read (the transport, the node or hangdbg there failed):
        ``error``, ``unreachable``, ``no-hangdbg``, ``timeout``, ``no-answer``."""
        return self in _NODE_FAILED


_NODE_FAILED = frozenset({NodeStatus.ERROR, NodeStatus.UNREACHABLE, NodeStatus.NO_HANGDBG, NodeStatus.TIMEOUT,
                          NodeStatus.NO_ANSWER})
