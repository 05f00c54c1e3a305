"""Assembly order of the packed passages: what the generator reads first.

- ``score``: the ranking's order (rank 1 first);
- ``document``: company, period, document, position (the pruning notes' assembler). It discards
  the ranking: under it, reordering the same survivors is inert and only pruning changes what
  the model reads;
- ``edges``: the strongest evidence at both ends (ranks 1, 3, 5, ... from the start, ranks 2, 4,
  ... from the end), against "lost in the middle" position effects.

Every policy is deterministic (ties by passage id); none changes which passages are packed.
"""

from __future__ import annotations

from fincrowd_ltr.packing.packer import PackedPassage, Packing

ORDERS = ("score", "document", "edges")


def _document_key(p: PackedPassage) -> tuple:
    c = p.citation
    return (
        c.company or "",
        str(c.period or ""),
        c.document or "",
        c.position if c.position is not None else -1,
        c.pid,
        c.part or "",
    )


def assemble(packing: Packing, order: str) -> Packing:
    """A copy of ``packing`` with its passages in ``order``."""
    by_rank = sorted(packing.passages, key=lambda p: (p.rank, p.citation.part or ""))
    if order == "score":
        arranged = by_rank
    elif order == "document":
        arranged = sorted(packing.passages, key=_document_key)
    elif order == "edges":
        front, back = by_rank[0::2], by_rank[1::2]
        arranged = front + back[::-1]
    else:
        raise ValueError(f"unknown order {order!r}; choose from {ORDERS}")
    return Packing(packing.query, packing.budget, arranged, list(packing.dropped), packing.overhead)
