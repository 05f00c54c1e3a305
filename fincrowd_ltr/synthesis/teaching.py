"""The corpus's own synthetic questions as the teacher of its static page table: MiniLM reads a
user's questions, so the table that reads the pages is taught where MiniLM's vectors of questions
about those pages point (:func:`fincrowd_ltr.retrieval.static_tuning.static_model_for`). No
label and no question record is read; decided on label-free questions (NOTES.md, rules 2-3)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from fincrowd_ltr.data.schema import Dataset
from fincrowd_ltr.data.store import PageStore
from fincrowd_ltr.defaults import DEFAULT_LINE_ITEMS
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.extractor import extractor_fingerprint
from fincrowd_ltr.retrieval.static_tuning import QuestionPairs
from fincrowd_ltr.synthesis.questions import VERSION, Synthesis, synthesis_recipe, synthesize

TEACHING_QUESTIONS = 2000  # synthetic questions of each draw that teaches a corpus's page table
# the teaching draws (each teaches a table; the page table is their mean: NOTES.md "Averaging
# the static page table over teaching draws", decided on label-free questions)
TEACHING_SEEDS = (0, 1, 2)


def page_table_questions(
    dataset: Dataset,
    n: int = TEACHING_QUESTIONS,
    seeds: tuple[int, ...] = TEACHING_SEEDS,
    extractor: FieldExtractor | None = None,
    written: Callable[[], Synthesis] | None = None,
) -> QuestionPairs | None:
    """``(question, source page)`` pairs of ``n`` synthetic questions of ``dataset``'s pages per
    teaching draw, one draw per seed of ``seeds`` (written only when a table is built; keyed by
    what writes them: the synthesis code and version, the extractor's, ``n`` and the seeds).
    ``extractor``: the one built from these passages, when the caller has it. ``None`` for a
    corpus read from disk page by page (a :class:`~fincrowd_ltr.data.store.PageStore`, larger
    than memory: synthesis reads every page), whose static rankers read the windows-only table.
    ``written``: returns a synthesis whose first ``n`` questions are the first draw's, when it is
    being written anyway (a fit's own, of one draw or several, when
    :func:`writes_teaching_questions` says so), so they are not written twice."""
    if not taught(dataset):
        return None
    parts = [VERSION, _code_fingerprint(), extractor_fingerprint(), n, seeds, DEFAULT_LINE_ITEMS]
    key = hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:16]

    def draw(seed: int) -> list[tuple[str, str]]:
        if written is None or seed != seeds[0]:
            found = synthesize(dataset, n, seed, extractor=extractor)
        else:
            found, teaching = written(), synthesis_recipe(n, seed)
            if _first_questions(found.recipe, n) != teaching:
                raise ValueError(
                    f"page_table_questions: the lent questions were written by {found.recipe}, "
                    f"the page table is taught by {teaching}"
                )
        return [(q.text, q.source) for q in found.questions[:n]]

    return QuestionPairs(f"synthetic-{key}", lambda: [draw(seed) for seed in seeds])


def writes_teaching_questions(n: int, seed: int, named_share: float | str, line_items: str) -> bool:
    """Whether a synthesis of ``n`` questions with ``seed``, ``named_share`` and ``line_items``
    (:func:`~fincrowd_ltr.synthesis.synthesize`'s) writes the questions of the page table's first
    teaching draw (:func:`page_table_questions`' defaults) as its first ones: a fit with these
    settings can lend its own (a fit of several draws, too)."""
    asked = synthesis_recipe(n, seed, named_share=named_share, line_items=line_items)
    return _first_questions(asked, TEACHING_QUESTIONS) == synthesis_recipe(
        TEACHING_QUESTIONS, TEACHING_SEEDS[0]
    )


def _first_questions(recipe: dict, n: int) -> dict | None:
    """The recipe of a synthesis's first ``n`` questions: the same recipe with ``n`` when it
    asked for ``n`` or more without a user's generator (the round-robin draw and the phrasing
    take items in order, so the first ``n`` of a larger synthesis are what ``n`` alone writes);
    else None."""
    if not recipe or recipe["generator"] or recipe["n"] < n:
        return None
    return {**recipe, "n": n}


def taught(dataset: Dataset) -> bool:
    """Whether the API teaches ``dataset``'s static page table (not for a corpus read from disk
    page by page): what a checkpoint's scorer recipe records."""
    return not isinstance(dataset.passages, PageStore)


def _code_fingerprint() -> str:
    """A hash of the synthesis code (what writes the questions), so that a change to it is a
    new table without a manual version bump."""
    digest = hashlib.sha1()
    for module in ("questions.py", "tables.py"):
        digest.update((Path(__file__).parent / module).read_bytes())
    return digest.hexdigest()[:16]


__all__ = ["TEACHING_QUESTIONS", "page_table_questions", "taught", "writes_teaching_questions"]
