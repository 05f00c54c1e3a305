"""Packing candidates into a token budget, with citations, and split-and-fuse groups by tokens.

Prompt format (``Packing.prompt``), ready for any generator::

    Question: <question>

    Context:
    [1] <document>, page <position> (<company>, <period>)
    <passage text>

    [2] ...

Every packed passage keeps its source (document, page or position, company, period; ``part i/n``
when a passage over the budget was split), so an answer can cite ``[k]``. Budgets count the whole
prompt: the question line, the headers and the texts. Nothing is dropped silently: what did not fit
is listed in ``Packing.dropped`` with its token count and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fincrowd_ltr.data.schema import Passage
from fincrowd_ltr.packing.split import split_passage
from fincrowd_ltr.packing.tokens import TokenCounter

DEFAULT_BUDGET = 32_000


@dataclass(frozen=True)
class Citation:
    """Where a packed text comes from."""

    pid: str
    document: str | None = None
    position: int | None = None
    company: str | None = None
    period: str | None = None
    part: str | None = None  # "i/n" for a split passage

    def header(self, number: int) -> str:
        where = self.document or self.pid
        if self.position is not None:
            where += f", page {self.position}"
        meta = ", ".join(str(v) for v in (self.company, self.period) if v)
        part = f" part {self.part}" if self.part else ""
        return f"[{number}] {where}{part}" + (f" ({meta})" if meta else "")


@dataclass
class PackedPassage:
    citation: Citation
    text: str
    tokens: int  # text and header
    rank: int  # 1-based rank in the order the pruning policy received


@dataclass
class Packing:
    """A packed context: what went in (in assembly order), what did not, and token totals."""

    query: str
    budget: int
    passages: list[PackedPassage]
    dropped: list[dict] = field(default_factory=list)
    overhead: int = 0  # question and section lines

    @property
    def tokens(self) -> int:
        return self.overhead + sum(p.tokens for p in self.passages)

    @property
    def pids(self) -> list[str]:
        """Every passage with some text in the context (a split one: any of its parts)."""
        return list(dict.fromkeys(p.citation.pid for p in self.passages))

    @property
    def whole_pids(self) -> list[str]:
        """The passages whose whole text is in the context: unsplit, or every part packed."""
        parts: dict[str, set[str]] = {}
        for p in self.passages:
            if p.citation.part is not None:
                parts.setdefault(p.citation.pid, set()).add(p.citation.part)
        return [
            pid
            for pid in self.pids
            if pid not in parts or len(parts[pid]) == int(next(iter(parts[pid])).split("/")[1])
        ]

    def prompt(self) -> str:
        blocks = [f"Question: {self.query}", "Context:"]
        for i, p in enumerate(self.passages, 1):
            blocks.append(f"{p.citation.header(i)}\n{p.text}")
        return "\n\n".join(blocks)


def _body(passage: Passage) -> str:
    """The text to pack: without a first line that repeats the document its header cites (a
    BEIR title, which the loader puts on the text's first line and takes as the document)."""
    head, newline, rest = passage.text.partition("\n")
    repeats = passage.document and head.strip() == passage.document.strip()
    return rest if newline and repeats and rest.strip() else passage.text


def _citation(passage: Passage, part: str | None = None) -> Citation:
    return Citation(
        passage.pid, passage.document, passage.position, passage.company, passage.period, part
    )


class Packer:
    """Greedy packing in the order given: a candidate that fits is packed, one that does not is
    listed and skipped (a later, shorter one may still fit); a candidate longer than the whole
    budget on its own is split at sentence or table-row boundaries and its parts are packed
    while they fit.

    Args:
        counter: The token counter.
        budget: Tokens of the whole prompt.
    """

    def __init__(self, counter: TokenCounter, budget: int = DEFAULT_BUDGET) -> None:
        if not budget >= 1:  # NaN too
            raise ValueError(f"budget must be at least one token; got {budget}")
        self.counter = counter
        self.budget = budget

    def _overhead(self, query: str) -> int:
        return self.counter.count(f"Question: {query}") + self.counter.count("Context:")

    def _header(self, citation: Citation) -> int:
        """Header tokens, counted with a three-digit number so that any assembly order (which
        renumbers the passages) stays within the budget."""
        return self.counter.count(citation.header(999))

    def pack(self, query: str, passages: list[Passage], ranks: list[int] | None = None) -> Packing:
        """Pack ``passages`` (in the pruning policy's priority order) into the budget; ``ranks``
        are their 1-based ranks in the ranking (default: their positions)."""
        packing = Packing(query, self.budget, [], [], self._overhead(query))
        if packing.overhead > self.budget:
            raise ValueError(
                f"the question alone takes {packing.overhead} tokens, over the budget of "
                f"{self.budget}"
            )
        ranks = ranks or list(range(1, len(passages) + 1))
        for rank, passage in zip(ranks, passages, strict=True):
            free = self.budget - packing.tokens
            citation = _citation(passage)
            header = self._header(citation)
            text = _body(passage)
            n = self.counter.count(text) + header
            if n <= free:
                packing.passages.append(PackedPassage(citation, text, n, rank))
                continue
            if n <= self.budget - packing.overhead:  # fits an empty context: not split
                packing.dropped.append(
                    {"pid": passage.pid, "rank": rank, "tokens": n, "reason": "over budget"}
                )
                continue
            self._pack_parts(packing, passage, rank)
        return packing

    def _pack_parts(self, packing: Packing, passage: Passage, rank: int) -> None:
        # parts sized for an empty context, with room for the longest header
        probe = _citation(passage, "99/99")
        limit = self.budget - packing.overhead - self._header(probe)
        parts = split_passage(_body(passage), max(1, limit), self.counter)
        for i, text in enumerate(parts, 1):
            citation = _citation(passage, f"{i}/{len(parts)}")
            n = self.counter.count(text) + self._header(citation)
            if n <= self.budget - packing.tokens:
                packing.passages.append(PackedPassage(citation, text, n, rank))
            else:
                packing.dropped.append(
                    {
                        "pid": passage.pid,
                        "part": f"{i}/{len(parts)}",
                        "rank": rank,
                        "tokens": n,
                        "reason": "over budget",
                    }
                )


def fuse_groups(packer: Packer, query: str, passages: list[Passage]) -> list[Packing]:
    """Split-and-fuse by tokens: consecutive groups in rank order, each packed within the budget
    (answer each group, then fuse the answers); unlike rank halves, no group can exceed it."""
    groups: list[Packing] = []
    remaining = list(passages)
    while remaining:
        packing = packer.pack(query, remaining)
        if not packing.passages:  # nothing fits even alone: report it and stop
            groups.append(packing)
            break
        packed = set(packing.pids)
        # what did not fit goes to the next group; parts of a passage packed here that did not
        # fit stay listed as dropped in this group
        packing.dropped = [d for d in packing.dropped if d["pid"] in packed]
        groups.append(packing)
        remaining = [p for p in remaining if p.pid not in packed]
    return groups


def rank_halves_exceed(
    counter: TokenCounter, query: str, passages: list[Passage], budget: int = DEFAULT_BUDGET
) -> dict:
    """The reviewed paper's rule: when question + top-20 exceed the budget, answer the top 1-10 and
    11-20 separately. Token counts of each half (with the question) and whether either still
    exceeds the budget."""
    q = counter.count(query)
    first = q + sum(counter.count(p.text) for p in passages[:10])
    second = q + sum(counter.count(p.text) for p in passages[10:20])
    whole = q + sum(counter.count(p.text) for p in passages[:20])
    return {
        "tokens_top20": whole,
        "split_triggered": whole > budget,
        "half_tokens": [first, second],
        "half_exceeds": whole > budget and max(first, second) > budget,
    }
