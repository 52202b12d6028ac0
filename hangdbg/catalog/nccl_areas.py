"""Where in NCCL a line was printed: the subsystem a source file belongs to, and what to check.

Heuristic (ours), from the layout of NVIDIA/nccl's ``src/`` tree (v2.18-v2.28: ``transport/nvls.cc``,
``transport/net_ib.cc``, ``misc/socket.cc``, ``bootstrap.cc`` ...) and NCCL's troubleshooting guide
(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html: NVLS needs the fabric
manager, GPUDirect RDMA and ACS, /dev/shm, NCCL_SOCKET_IFNAME). No I/O.
"""

from __future__ import annotations

__all__ = ["NCCL_AREAS", "areas_of"]

NCCL_AREAS: tuple[tuple[str, str], ...] = (
    ("nvls", "NVLS, NVLink SHARP through the NVSwitches: needs nvidia-fabricmanager running and healthy "
             "(a restarted fabric manager needs a GPU reset); NCCL_NVLS_ENABLE=0 avoids it"),
    ("net_ib", "the InfiniBand/RoCE transport of this host: NIC, port, GPUDirect RDMA (ACS/IOMMU), memlock limit"),
    ("ibvwrap", "an ibverbs call of this host: NIC, port, RDMA limits"),
    ("coll_net", "CollNet / SHARP through the network plugin"),
    ("net_socket", "the TCP socket transport between nodes"),
    ("socket", "TCP sockets: interface (NCCL_SOCKET_IFNAME), firewall, the peer"),
    ("bootstrap", "the bootstrap between ranks: MASTER_ADDR / NCCL_COMM_ID reachability"),
    ("shm", "shared memory in /dev/shm"),
    ("p2p", "GPU peer-to-peer (NVLink/PCIe P2P, IOMMU/ACS)"),
    ("graph/", "the topology NCCL detected (PCI/NVLink/NIC layout, NCCL_TOPO_FILE)"),
    ("xml", "the topology NCCL detected (PCI/NVLink/NIC layout, NCCL_TOPO_FILE)"),
    ("proxy", "NCCL's proxy thread (network progress)"),
    ("alloc", "a GPU/host memory allocation inside NCCL"),
)
"""File-name part -> the subsystem and what to check (first match wins)."""


def areas_of(sources: list[str] | tuple[str, ...]) -> list[str]:
    """The subsystems of NCCL source files (``transport/nvls.cc`` or ``transport/nvls.cc:244``),
    once each, in order; files outside every area add nothing."""
    found = (next((a for k, a in NCCL_AREAS if k in f.rsplit(":", 1)[0]), "") for f in sources)
    return list(dict.fromkeys(a for a in found if a))
