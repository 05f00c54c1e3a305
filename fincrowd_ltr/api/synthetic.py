"""``synthesize``: label-free training questions from a corpus, their BEIR folder, and the training
banks ``fit_correction`` mixes into every training set.

Company-fold figures must not see the held-out companies' filings: with ``scope="folds"``
(the default) a training set only takes synthetic questions of companies outside the round's
test, validation and calibration folds (companies without labelled questions are in no fold and
always allowed). ``scope="transductive"`` uses every company's filings, still without labels: a
user's setting, reported beside the other.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from fincrowd_ltr.api.corpus import DEFAULT_CACHE, load_dataset
from fincrowd_ltr.data.schema import SYNTHETIC_SUFFIX, DataError, Dataset
from fincrowd_ltr.data.splits import page_unit
from fincrowd_ltr.data.store import PageStore
from fincrowd_ltr.defaults import DEFAULT_LINE_ITEMS
from fincrowd_ltr.engine import Forked
from fincrowd_ltr.features import BankFeaturizer
from fincrowd_ltr.features.examples import BankExample, make_examples
from fincrowd_ltr.fields import FieldExtractor
from fincrowd_ltr.fields.corpus import corpus_extractor
from fincrowd_ltr.retrieval.build import BankSpec, FirstStages
from fincrowd_ltr.retrieval.build import build_banks as _build_banks
from fincrowd_ltr.retrieval.first_stage import RUN
from fincrowd_ltr.retrieval.rankers import RANKERS
from fincrowd_ltr.retrieval.sharded import corpus_index
from fincrowd_ltr.retrieval.static_tuning import QuestionPairs
from fincrowd_ltr.settings import AUTO, SyntheticSettings
from fincrowd_ltr.synthesis import Synthesis, named_share_of, page_table_questions
from fincrowd_ltr.synthesis import synthesize as _synthesize

_NAMED_SHARE_GAP = 0.25
_NAMED_SHARE_SAMPLE = 500  # synthetic questions read for their share naming a company
_GROUPS = 10  # groups a synthetic folder's unit needs: twice the default 5 folds


def synthesize(
    dataset: str | Dataset,
    n: int = 500,
    seed: int = 0,
    *,
    data_root: str | Path | None = None,
    companies=None,
    generator=None,
    cache_dir: str | Path | None = DEFAULT_CACHE,
    difficulty: bool = True,
    named_share: float | str = 1.0,
    line_items: str = DEFAULT_LINE_ITEMS,
) -> Synthesis:
    """Synthesise ``n`` training questions from a corpus's pages (no labels read; see
    :func:`fincrowd_ltr.synthesis.synthesize`), with the share of questions BM25 finds first or
    not at all when ``difficulty``; ``named_share`` of them name their company (``"auto"``: as
    many as of the dataset's own questions, whose texts alone are read); ``line_items``: which
    table rows are asked about (``"known"`` metrics or ``"any"`` specific label)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DataError(f"synthesize: n must be a count of questions >= 0; got {n!r}", "n")
    data = load_dataset(dataset, data_root, "all") if isinstance(dataset, str) else dataset
    _check_companies(companies, data)
    extractor = corpus_extractor(data.passages)
    texts = [q.text for q in data.queries.values()]
    share = resolve_named_share(named_share, texts, extractor)
    found = _synthesize(
        data, n, seed, companies=companies, generator=generator, name=data.name + SYNTHETIC_SUFFIX,
        extractor=extractor, named_share=share, line_items=line_items,
    )  # fmt: skip
    found = _stored_pages(found, data)
    if share == named_share:  # not 'auto' (the default 1 included): is it far off?
        check_named_share(found, texts, extractor)
    if difficulty and found.questions:
        cache = None if cache_dir is None else Path(cache_dir)
        found.measure_difficulty(corpus_index(found.passages, cache_dir=cache, progress=False))
    for note in found.notes:  # fewer questions than asked and why; interim filings' wording
        warnings.warn(f"synthesize: {note}", stacklevel=2)
    return found


def _check_companies(companies, data: Dataset) -> None:
    """Refuse a bare string (read as its letters) and names no page carries (the templates
    would find nothing, and say that of the tables, not of the names)."""
    if companies is None:
        return
    if isinstance(companies, str):
        raise DataError(
            f"synthesize: companies must be a list of names, not a string ({[companies]!r})",
            "companies",
        )
    known = {page_unit(p) for p in data.passages.values()}
    unknown = sorted(set(companies) - known)
    if unknown and len(unknown) == len(set(companies)):
        names = sorted(k for k in known if k)
        raise DataError(
            f"synthesize: no page of {data.name} belongs to companies {unknown[:5]} (its pages' "
            f"metadata.company, else document, e.g. {names[:5]}; names are matched exactly)",
            "companies",
        )
    if unknown:
        warnings.warn(f"synthesize: no page belongs to companies {unknown[:5]}", stacklevel=3)


def check_named_share(
    synthetic: Synthesis,
    questions: list[str],
    extractor: FieldExtractor,
    who: str = "synthesize",
    option: str = "named_share='auto' (--named-share auto)",
) -> None:
    """Warn when the share of ``synthetic``'s questions that name their company is far
    (``_NAMED_SHARE_GAP`` or more) from the share of ``questions`` (the user's texts) that name
    one: a residual trained on them would lean on names the real ones rarely (or mostly) give.
    Read from the questions written (up to ``_NAMED_SHARE_SAMPLE``, evenly spread), not the share
    asked: pages that name no company give no question that names one. ``who`` and ``option``
    word it for the caller."""
    written = synthetic.questions
    if not written or not questions:
        return
    step = max(1, len(written) // _NAMED_SHARE_SAMPLE)
    theirs = named_share_of((q.text for q in written[::step]), extractor)
    yours = named_share_of(questions, extractor)
    if abs(yours - theirs) >= _NAMED_SHARE_GAP:
        warnings.warn(
            f"{who}: {yours:.0%} of the dataset's {len(questions)} questions name a company, "
            f"and {theirs:.0%} of the synthetic ones name theirs (named_share "
            f"{synthetic.named_share:g}); pass {option} to match your questions",
            stacklevel=3,
        )


def resolve_named_share(
    share: float | str, questions: Iterable[str], extractor: FieldExtractor
) -> float | str:
    """``share``, or with ``"auto"`` the share of ``questions`` (texts) naming a company
    (:func:`fincrowd_ltr.synthesis.synthesize` checks any other value)."""
    return named_share_of(questions, extractor) if share == AUTO else share


def require_writable(out: Path, overwrite: bool = False) -> None:
    """Refuse ``out`` when it is a file, or a folder that holds files and ``overwrite`` is off
    (it may be the corpus the questions came from)."""
    if out.exists() and not out.is_dir():
        raise DataError(f"{out}: not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise DataError(
            f"{out}: already holds files (a corpus?); choose an empty or new --out, or pass "
            "--overwrite to replace them"
        )


def folder_groups(synthesis: Synthesis) -> tuple[str, dict[str, str]]:
    """The unit a synthetic folder's folds keep together and each question's group in it: the
    company, else (fewer than ``_GROUPS`` companies: a corpus of one company's filings cannot
    fill company folds) the source page's document, else the source page."""
    questions, passages = synthesis.questions, synthesis.passages
    units = {
        "company": {q.qid: q.company for q in questions},
        "document": {q.qid: passages[q.source].document or q.source for q in questions},
        "page": {q.qid: q.source for q in questions},
    }
    for unit, groups in units.items():
        if len(set(groups.values())) >= _GROUPS:
            return unit, groups
    return "page", units["page"]


def write_beir(synthesis: Synthesis, out: str | Path, overwrite: bool = False) -> Path:
    """A BEIR folder of the synthetic questions: ``corpus.jsonl`` (the passages and their
    metadata), ``queries.jsonl`` (``group``: :func:`folder_groups`, ``source``, ``template``,
    typed ``negatives``), ``qrels.tsv`` and ``report.json``. A folder that already holds files is
    refused unless ``overwrite`` (it may be the corpus the questions came from); each file is
    written under a temporary name and renamed, so none is ever half-written (a failure between
    two files leaves the earlier ones new and the later ones old)."""
    out = Path(out)
    require_writable(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)

    def corpus():
        for pid, p in synthesis.passages.items():
            meta = {k: v for k, v in p.metadata().items() if v is not None}
            yield json.dumps({"_id": pid, "text": p.text, "metadata": meta}) + "\n"

    unit, groups = folder_groups(synthesis)

    def queries():
        for q in synthesis.questions:
            row = q.to_dict()
            record = {"_id": row.pop("qid"), "text": row.pop("text"), "group": groups[q.qid], **row}
            yield json.dumps(record) + "\n"

    def qrels():
        yield "query-id\tcorpus-id\tscore\n"
        for q in synthesis.questions:
            yield from (f"{q.qid}\t{pid}\t1\n" for pid in q.relevant)

    report = [json.dumps({**synthesis.report(), "grouped_by": unit}, indent=1) + "\n"]
    files = {"corpus.jsonl": corpus(), "queries.jsonl": queries(), "qrels.tsv": qrels()}
    for name, lines in {**files, "report.json": report}.items():  # streamed, then renamed
        tmp = out / f".{name}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
        tmp.replace(out / name)
    return out


@dataclass
class SyntheticExamples:
    """Synthetic training banks and the company each question was written from."""

    examples: list[BankExample]
    groups: dict[str, str]
    synthesis: Synthesis

    def allowed(self, excluded: set[str]) -> list[BankExample]:
        """The banks of questions whose company is not in ``excluded``."""
        return [e for e in self.examples if self.groups[e.qid] not in excluded]


def synthetic_scorer(settings: SyntheticSettings, ranker: str, stage: str) -> str:
    """The ranker that scores the synthetic banks (``settings.ranker``, else ``ranker`` or its
    static stand-in), checked before any bank is built: your run holds no synthetic question,
    so it can neither score their banks nor retrieve them."""
    if stage == RUN:
        raise DataError(
            "synthetic questions are not in your run, so it cannot retrieve their banks: fit with "
            "a first stage of the package (--first-stage auto or bm25...) and your run as the "
            "ranker, or without --synthetic"
        )
    scorer = settings.resolved(ranker).ranker
    if scorer == RUN:
        raise DataError(
            "synthetic questions have no scores in your run: score their banks with a ranker of "
            "the package (SyntheticSettings.ranker / --synthetic-ranker, e.g. bm25)"
        )
    if scorer not in RANKERS:
        raise DataError(f"unknown synthetic ranker {scorer!r}; choose from {RANKERS}")
    return scorer


def synthesis_for(
    settings: SyntheticSettings,
    data: Dataset,
    extractor: FieldExtractor,
    questions: Iterable[str] = (),
) -> Synthesis:
    """The questions ``settings`` synthesises from ``data``'s passages for training (named as
    often as ``questions`` name a company when the share is ``"auto"``)."""
    share = resolve_named_share(settings.named_share, questions, extractor)
    found = _synthesize(
        data, settings.total, settings.seed, name=data.name + SYNTHETIC_SUFFIX, extractor=extractor,
        named_share=share, line_items=settings.line_items,
    )  # fmt: skip
    return _stored_pages(found, data)


def _stored_pages(found: Synthesis, data: Dataset) -> Synthesis:
    """A synthesis of pages read from a sharded index keeps them there (the copy synthesis read
    is let go), so that its banks search that index and its fingerprint is the recorded one."""
    if isinstance(data.passages, PageStore):
        return replace(found, passages=data.passages)
    return found


def synthesis_in_background(
    settings: SyntheticSettings,
    data: Dataset,
    extractor: FieldExtractor,
    questions: Iterable[str] = (),
) -> Forked:
    """:func:`synthesis_for` started now in a forked child (synthesis is single-threaded
    Python, so it takes the core that other single-threaded steps leave idle); its
    ``result()`` waits for it. Only the questions travel back: the passages are ``data``'s."""
    questions = list(questions)

    def child() -> Synthesis:
        return replace(synthesis_for(settings, data, extractor, questions), passages={})

    pages = data.passages if isinstance(data.passages, PageStore) else dict(data.passages)
    return Forked(child, lambda found: replace(found, passages=pages))


def synthetic_examples(
    settings: SyntheticSettings,
    data: Dataset,
    featurizer: BankFeaturizer,
    ranker: str,
    stage: str,
    mode: str,
    bank_size: int,
    cache_dir,
    progress: bool,
    questions: Iterable[str] = (),
    found: Synthesis | None = None,
    stages: FirstStages | None = None,
    static_questions: str = "minilm",
    teaching: QuestionPairs | None = None,
) -> SyntheticExamples:
    """Banks of ``settings.total`` questions synthesised from ``data``'s passages, built by the same
    first stage (``stage``, resolved), scored by ``settings.ranker`` (default ``ranker`` or its
    static stand-in) and featurised by the labelled corpus's ``featurizer``; only banks with a
    relevant candidate are kept. The residual reads a synthetic bank's standardised base scores
    like a labelled bank's. ``questions``: the texts an ``"auto"`` named share is read from;
    ``found``: those questions synthesised already (:func:`synthesis_for`); ``stages``: the
    index and first stage the labelled banks were built with; ``static_questions``: who reads
    a question for a static scorer (:class:`~fincrowd_ltr.retrieval.build.BankSpec`);
    ``teaching``: the questions that teach the labelled banks' static page table (default: the
    corpus's own, :func:`~fincrowd_ltr.synthesis.page_table_questions`)."""
    scorer = synthetic_scorer(settings, ranker, stage)
    if found is None:
        found = synthesis_for(settings, data, featurizer.extractor, questions)
    syn = found.dataset()
    spec = BankSpec(size=bank_size, mode=mode, first_stage=stage, static_questions=static_questions)
    cache = None if cache_dir is None else Path(cache_dir)
    pairs = (
        teaching
        if teaching is not None
        else page_table_questions(data, extractor=featurizer.extractor)
    )
    bankset = _build_banks(
        syn, "all", [scorer], spec, cache, progress=progress, stages=stages, static_pairs=pairs
    )
    examples = [
        e for e in make_examples(syn, bankset, scorer, featurizer, cache=cache) if e.has_support
    ]
    position = {q.qid: i for i, q in enumerate(found.questions)}
    for e in examples:  # draw k: the k-th n questions written (each spread over the companies)
        e.weight, e.synthetic = settings.weight, True
        e.draw = position[e.qid] // settings.n
    return SyntheticExamples(examples, {q.qid: q.company for q in found.questions}, found)
