"""A plain tree of labelled nodes: what ``firmware inspect`` shows a human (the CLI renders it with rich)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    """One line of a printed tree and the lines under it."""
    label: str
    children: list[Node] = field(default_factory=list)

    def add(self, label: str) -> Node:
        """Add a child line and return it."""
        child = Node(label)
        self.children.append(child)
        return child

    def lines(self, indent: str = "") -> list[str]:
        """The tree as indented text lines (for tests and non-rich output)."""
        out = [indent + self.label]
        for c in self.children:
            out += c.lines(indent + "  ")
        return out


def span(offset: int, size: int) -> str:
    """``@0x100 +0x2000`` : where a structure sits and how long it is."""
    return f"@0x{offset:x} +0x{size:x}"


def hexv(v: object) -> str:
    """An int in hex, anything else as ``str`` (booleans stay ``True``/``False``)."""
    return f"0x{v:x}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
