"""A user's own ranker, outside the package: TF-IDF cosine (sublinear term frequency, words of
two or more letters or digits) over a dataset's whole corpus, written as a TREC run of each
question's top ``--depth`` passages. It stands for "your own run" in the measurements of a
checkpoint over another base (``fincrowd calibrate --base-ranker run --run FILE``).

    .venv/bin/python benchmarks/user_run.py --dataset finqa --data-root ../shared/data \\
        --out runs/syn/finqa_tfidf.trec
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fincrowd_ltr as fc  # noqa: E402
from fincrowd_ltr.data.beir import write_trec_run  # noqa: E402

WORD = re.compile(r"[a-z0-9][a-z0-9.]*[a-z0-9]|[a-z]{2,}")


def term_counts(texts: list[str], vocab: dict[str, int], grow: bool) -> sparse.csr_matrix:
    """Rows of term counts (``vocab`` grows with new words when ``grow``)."""
    rows, cols, vals = [], [], []
    for i, text in enumerate(texts):
        for word, n in Counter(WORD.findall(text.lower())).items():
            j = vocab.setdefault(word, len(vocab)) if grow else vocab.get(word)
            if j is not None:
                rows.append(i)
                cols.append(j)
                vals.append(n)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(vocab)), dtype=float)


def tfidf_run(data: fc.Dataset, depth: int) -> dict[str, dict[str, float]]:
    """Each question's top ``depth`` passages by TF-IDF cosine."""
    pids = list(data.passages)
    vocab: dict[str, int] = {}
    docs = term_counts([data.passages[p].text for p in pids], vocab, grow=True)
    idf = np.log((1 + docs.shape[0]) / (1 + np.bincount(docs.indices, minlength=len(vocab)))) + 1
    qids = list(data.queries)
    questions = term_counts([data.queries[q].text for q in qids], vocab, grow=False)

    def weigh(m: sparse.csr_matrix) -> sparse.csr_matrix:
        m = m.copy()
        m.data = 1 + np.log(m.data)
        m = m @ sparse.diags(idf)
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1))).ravel()
        return sparse.diags(1 / np.maximum(norms, 1e-12)) @ m

    scores = (weigh(questions) @ weigh(docs).T).toarray()
    run = {}
    for i, q in enumerate(qids):
        top = np.argsort(-scores[i], kind="stable")[:depth]
        run[q] = {pids[j]: float(scores[i, j]) for j in top}
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="finqa")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--split", default="all")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    data = fc.load_dataset(args.dataset, args.data_root, args.split)
    run = tfidf_run(data, args.depth)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_trec_run(args.out, run, tag="tfidf")
    print(f"{args.out}: {len(run)} questions, top {args.depth} of {len(data.passages)} passages")


if __name__ == "__main__":
    main()
