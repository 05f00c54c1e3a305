"""The serving tests' shared fixtures: a hand-set checkpoint, its toy candidates and base
scores, and a real ``fincrowd serve`` process on loopback."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import torch

from fincrowd_ltr.features import FEATURE_NAMES
from fincrowd_ltr.model import ResidualScorer
from fincrowd_ltr.model.correction import save_residual
from fincrowd_ltr.model.gate import GateCalibration, IdentityGate
from fincrowd_ltr.model.gate_features import GATE_FEATURE_NAMES

QUERY = "What was Acme revenue in FY2021 (USD millions)?"


def candidates():
    out = []
    for i, year in enumerate([2019, 2020, 2021, 2021, 2018, 2020]):
        out.append(
            {
                "id": f"c{i}",
                "text": f"Acme revenue for fiscal {year} was {100 + i} million dollars.",
                "metadata": {"company": "Acme", "period": year, "doc_type": "10k"},
            }
        )
    return out


BASE = [3.0, 2.5, 1.0, 0.5, 2.0, 2.2]


@pytest.fixture
def checkpoint(tmp_path):
    return make_checkpoint(tmp_path)


def make_checkpoint(tmp_path):
    """A hand-set correction: period matches lifted, period conflicts pushed down; domains
    'open' (the gate opens) and 'closed' (never opens)."""
    scorer = ResidualScorer(len(FEATURE_NAMES), alpha=2.0)
    with torch.no_grad():
        scorer.weight.zero_()
        scorer.weight[FEATURE_NAMES.index("period_match")] = 2.0
        scorer.weight[FEATURE_NAMES.index("period_conflict")] = -2.0
    gate = IdentityGate(len(GATE_FEATURE_NAMES))
    with torch.no_grad():
        gate.linear.bias.fill_(3.0)  # confident: open
    domains = {
        "open": GateCalibration(1.0, 0.5, 0.03, 20, 0.1, 0.0, 0.5),
        "closed": GateCalibration(1.0, float("inf"), 0.03, 20, 0.0, 0.0, 0.0),
    }
    companies = {"Acme": ["Acme Corp"]}
    save_residual(tmp_path / "ckpt", scorer, "dense", {"dataset": "toy"}, gate, domains, companies)
    return tmp_path / "ckpt"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def start_server(folder, *extra: str):
    """A real ``fincrowd serve`` process on a free loopback port: ``(proc, url, health)``."""
    port = free_port()
    args = ["serve", f"--checkpoint={folder}", f"--port={port}", *extra]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fincrowd_ltr.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                return proc, url, json.loads(r.read())
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stdout.read().decode()) from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.fixture
def server(checkpoint):
    proc, url, health = start_server(
        checkpoint, "--max-candidates=50", "--max-text-chars=500", "--workers=1"
    )
    yield url, health
    proc.terminate()
    proc.wait(timeout=10)


def request_body(domain="open", **changes):
    cands = [{**c, "base_score": s} for c, s in zip(candidates(), BASE, strict=True)]
    return {"query": QUERY, "domain": domain, "candidates": cands, **changes}
