"""A property-based fuzz of the HTTP API from its own OpenAPI schema (schemathesis) against a
real server process: no request makes it answer 5xx, and it answers correctly afterwards."""

import json

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from tests.serving.conftest import BASE, QUERY, candidates, post, request_body, start_server  # noqa: E402  # noqa: E402

MAX_EXAMPLES = 150  # bounded to fit CI


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.serving.conftest import make_checkpoint

    folder = make_checkpoint(tmp_path_factory.mktemp("fuzz"))
    proc, url, _ = start_server(folder, "--workers=1", "--max-candidates=50")
    yield folder, url
    proc.terminate()
    proc.wait(timeout=10)


def test_no_request_gets_a_server_error(served):
    """Every operation of the schema, MAX_EXAMPLES valid and MAX_EXAMPLES invalid generated
    requests each (derandomised)."""
    from hypothesis import given

    _, url = served
    api = schemathesis.openapi.from_url(url + "/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert any(op.path == "/rerank" for op in operations)
    seen = {"4xx": 0, "2xx": 0}
    modes = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
    runs = [(op, modes[0]) for op in operations]
    runs += [(op, modes[1]) for op in operations if op.method.upper() == "POST"]  # has a body
    for operation, mode in runs:
        path = operation.path

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case):
            response = case.call(base_url=url)
            assert response.status_code < 500, (case.body, response.text[:300])
            if response.status_code >= 400:
                seen["4xx"] += 1
                body = response.json()
                assert set(body) == {"error", "field"}, body  # 404, 405 and 415 included
                assert "/work" not in body["error"] and "/tmp" not in body["error"]
                if path == "/rerank":  # noqa: B023 (check runs before the loop moves on)
                    _check_field(body)
            else:
                seen["2xx"] += 1

        check()
    assert seen["4xx"] and seen["2xx"]  # the fuzz reached both the errors and real answers


REQUEST_FIELDS = ("query", "candidates", "domain", "fallback")


def _check_field(body: dict) -> None:
    """The field an error names is a request field, and "domain" only for domain errors (issue
    23: the catch-all named "domain" for duplicate ids or a blank query)."""
    field = body["field"]
    if field is None:
        return
    assert field.split("[")[0].split(".")[0] in REQUEST_FIELDS, body
    if field == "domain":
        assert "domain" in body["error"] or "gate" in body["error"], body
    if "unique" in body["error"]:
        assert field.endswith(".id"), body
    if "query must be" in body["error"]:
        assert field == "query", body


def test_server_answers_correctly_after_the_fuzz(served):
    from fincrowd_ltr.serving.reranker import FinCrowdReranker

    folder, url = served
    status, body = post(url + "/rerank", json.dumps(request_body()).encode())
    expected = FinCrowdReranker.from_pretrained(folder).rerank(QUERY, candidates(), BASE, "open")
    assert status == 200 and body["ranking"] == expected.ranking
