"""The merged call-prefix tree: every rank's stack laid into one tree whose nodes carry rank sets.

This is the 2D-trace/space view of LLNL STAT (Arnold et al., "Stack Trace Analysis for Large
Scale Debugging", IPDPS 2007): paths from the root are call prefixes (outermost frame first), and
a node's rank set is every rank whose stack passes through it. Built from equivalence classes, so
its cost grows with the number of distinct stacks, not with the number of ranks.
"""

from __future__ import annotations

from ..model import TreeNode
from ..frames import Frame

__all__ = ["build_tree"]


class _Node:
    __slots__ = ("frame", "sets", "children")

    def __init__(self, frame: Frame | None) -> None:
        self.frame = frame
        self.sets: list[frozenset[int]] = []
        self.children: dict[tuple, _Node] = {}


def build_tree(classes: list[tuple[tuple[Frame, ...], frozenset[int]]]) -> TreeNode:
    """Merge ``(frames innermost-first, ranks)`` pairs into one :class:`TreeNode` root."""
    root = _Node(None)
    for frames, ranks in classes:
        node = root
        node.sets.append(ranks)
        for frame in reversed(frames):
            key = frame.key
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node(frame)
            child.sets.append(ranks)
            node = child
    return _freeze(root)


def _freeze(root: _Node) -> TreeNode:
    # iterative post-order: stacks can be deeper than Python's recursion limit
    order: list[_Node] = []
    todo = [root]
    while todo:
        node = todo.pop()
        order.append(node)
        todo.extend(node.children.values())
    frozen: dict[int, TreeNode] = {}
    for node in reversed(order):
        kids = [frozen.pop(id(c)) for c in node.children.values()]
        if len(kids) > 1:  # min() of a 100,000-rank set on every node of a long common path cost 0.1 s
            kids.sort(key=lambda n: min(n.ranks))
        if len(node.sets) == 1:
            ranks = node.sets[0]
        elif len(node.children) == 1 and len(next(iter(node.children.values())).sets) == len(node.sets):
            ranks = kids[0].ranks  # the same classes pass through the only child: share its set
        else:
            ranks = frozenset().union(*node.sets)
        frozen[id(node)] = TreeNode(node.frame, ranks, tuple(kids))
    return frozen[id(root)]
