"""What the identity gate adds per 100-candidate bank on one core: gate features, logit and
decision, timed side by side with the always-on residual on the same banks (medians).

    .venv/bin/python benchmarks/gate.py [--data-root ../shared/data] [--banks 50]

Bank features are precomputed (as in serving, where the residual needs them anyway); the gate's
cost is what it adds on top of scoring the residual.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from _banks import financebench_banks  # noqa: E402

from fincrowd_ltr.features import FEATURE_NAMES, BankFeaturizer  # noqa: E402
from fincrowd_ltr.fields import FieldExtractor  # noqa: E402
from fincrowd_ltr.model import ResidualScorer  # noqa: E402
from fincrowd_ltr.model.correction import GatedCorrection  # noqa: E402
from fincrowd_ltr.model.gate import GateCalibration, IdentityGate  # noqa: E402
from fincrowd_ltr.model.gate_features import GATE_FEATURE_NAMES  # noqa: E402

TARGET_MS = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cache-dir", default=".cache")
    parser.add_argument("--banks", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    data, banks = financebench_banks(args.data_root, args.cache_dir, args.banks)
    featurizer = BankFeaturizer(FieldExtractor.from_passages(data.passages.values()), data.passages)
    scorer = ResidualScorer(len(FEATURE_NAMES))
    gate = IdentityGate(len(GATE_FEATURE_NAMES))
    calibration = GateCalibration(1.0, 0.5, 0.03, 10, 0.0, 0.0, 0.0)
    model = GatedCorrection(scorer, gate, {"d": calibration}, featurizer.extractor.companies)
    prepared = []
    for bank in banks:
        text = data.queries[bank.qid].text
        x = featurizer.features(text, bank.pids)
        prepared.append((x, bank.first_stage, featurizer.query_fields(text, bank.pids)))
    residual_ms, gate_ms = [], []
    for _ in range(args.repeats):
        for x, base, fields in prepared:
            start = time.perf_counter()
            model.decide(x, base, fields, None)  # always on: residual and order
            residual_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            model.decide(x, base, fields, "d")  # gated: + gate features, logit, decision
            gate_ms.append((time.perf_counter() - start) * 1e3)
    mine, theirs = statistics.median(gate_ms), statistics.median(residual_ms)
    print(
        f"gated decision (residual, gate features, logit, decision): {mine:.3f} ms median "
        f"({len(gate_ms)} timings; target <= {TARGET_MS} ms)"
    )
    print(f"always-on decision, same banks: {theirs:.3f} ms median per bank")
    print(f"gate's own cost: {mine - theirs:.3f} ms (ratio gated / always-on {mine / theirs:.2f}x)")


if __name__ == "__main__":
    main()
