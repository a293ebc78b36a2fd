"""The OpenAPI schema fuzzed with schemathesis: no input makes the server answer 5xx, and answers
match what the schema documents (status codes, content types, bodies). POSTs carry the real CSRF
secret, so the fuzzer reaches the edit handlers instead of stopping at the CSRF guard."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

LOOPBACK = {"Host": "127.0.0.1"}


@pytest.fixture
def api_schema(client):
    return schemathesis.openapi.from_asgi("/api/openapi.json", client.app, headers=LOOPBACK)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_a_server_error(case, client):
    case.headers = {**(case.headers or {}), **LOOPBACK}
    if case.method == "POST":
        case.headers["X-CSRF-Token"] = client.csrf
    case.call_and_validate(
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ]
    )
