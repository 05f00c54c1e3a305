"""Corpus quirks: identical pages across filings, filings stored under two names.

Exact duplicates are found by hashing whitespace-normalised text. Near-empty pages (scanned or
graphic pages) are identical to each other without being the same evidence, so they are skipped.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from fincrowd_ltr.data.schema import Passage

MIN_CHARS_FOR_DUPLICATE = 40


def text_key(text: str) -> str:
    """A hash of the text with whitespace collapsed and case folded."""
    return hashlib.sha1(" ".join(text.split()).lower().encode("utf-8")).hexdigest()


def text_keys(passages: dict[str, Passage]) -> dict[str, str]:
    """:func:`text_key` of every passage, by id."""
    return {pid: text_key(p.text) for pid, p in passages.items()}


def duplicate_groups(
    passages: dict[str, Passage], keys: dict[str, str] | None = None
) -> list[list[str]]:
    """Groups (size >= 2) of passage ids with identical normalised text, in corpus order."""
    keys = keys if keys is not None else text_keys(passages)
    groups: dict[str, list[str]] = defaultdict(list)
    for pid, passage in passages.items():
        if len(passage.text.strip()) >= MIN_CHARS_FOR_DUPLICATE:
            groups[keys[pid]].append(pid)
    return [ids for ids in groups.values() if len(ids) > 1]


def alias_documents(
    passages: dict[str, Passage], keys: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """Pairs of documents whose pages are identical, page for page (one filing, two names)."""
    keys = keys if keys is not None else text_keys(passages)
    pages: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for pid, passage in passages.items():
        if passage.document is not None:
            pages[passage.document].append((passage.position or 0, keys[pid]))
    by_content: dict[tuple, list[str]] = defaultdict(list)
    for doc, items in pages.items():
        by_content[tuple(key for _, key in sorted(items))].append(doc)
    pairs = []
    for docs in by_content.values():
        docs = sorted(docs)
        pairs.extend((docs[0], other) for other in docs[1:])
    return pairs


def gold_equivalents(
    qrels: dict[str, dict[str, int]], groups: list[list[str]]
) -> dict[str, dict[str, str]]:
    """Per query, every exact duplicate of a gold passage mapped to that gold passage."""
    group_of = {pid: ids for ids in groups for pid in ids}
    out: dict[str, dict[str, str]] = {}
    for qid, rels in qrels.items():
        mapping = {}
        for pid, grade in rels.items():
            if grade > 0:
                for dup in group_of.get(pid, ()):
                    if dup not in rels:
                        mapping[dup] = pid
        out[qid] = mapping
    return out


def collapse_duplicates(ranked: list[str], equivalents: dict[str, str]) -> list[str]:
    """A ranking where a duplicate of a gold passage counts as that gold passage, once.

    Each duplicate is replaced by its gold passage's id; a gold passage already seen earlier in the
    ranking is replaced by a placeholder, so ranks do not move and nothing counts twice.
    """
    seen: set[str] = set()
    out = []
    for i, pid in enumerate(ranked):
        pid = equivalents.get(pid, pid)
        if pid in seen:
            pid = f"\0duplicate-{i}"
        seen.add(pid)
        out.append(pid)
    return out
