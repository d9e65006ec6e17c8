"""Issue 32: "The OpenAPI document validates (a schema validator in the tests) and lists every endpoint", "with an
OpenAPI schema served at /api/v1/openapi.json and browsable docs", and "every error is a JSON body with a typed
code and the reasons"."""

import json
import re

from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, path
from openapi_spec_validator import validate

from evaluator.web.api import api
from rsi_site.urls import urlpatterns as site_urlpatterns


def _fault(request):
    raise RuntimeError("a fault of the server, with a secret in it")


urlpatterns = [path("api/v1/fault", _fault), *site_urlpatterns]
handler500 = "rsi_site.errors.server_error"


def served_document(client) -> dict:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    return response.json()


def api_routes() -> set[str]:
    """Every route Django serves under /api/v1/, as an OpenAPI path template, the document's own routes apart."""
    resolver = next(
        p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and str(p.pattern) == "api/v1/"
    )
    routes = set()
    for pattern in resolver.url_patterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        if route in ("", "openapi.json", "docs"):
            continue
        routes.add("/api/v1/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))
    return routes


def test_the_served_document_is_valid_openapi(client):
    document = served_document(client)
    assert document["openapi"].startswith("3.")
    validate(document)  # raises on any violation of the OpenAPI schema


def test_the_document_lists_every_endpoint_django_serves(client):
    document = served_document(client)
    assert set(document["paths"]) == api_routes()
    assert len(document["paths"]) >= 15


def test_every_operation_says_its_permission_and_documents_its_errors(client):
    document = served_document(client)
    error_schema = document["components"]["schemas"]["ErrorOut"]
    assert set(error_schema["required"]) == {"code", "reasons"}
    for route, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {route}"
            assert operation.get("x-rsi-permission"), where
            assert operation.get("description") or operation.get("summary"), where
            assert operation.get("security"), where  # a token or a session, never open
            for status in ("400", "401", "403", "404", "422", "429"):
                content = operation["responses"][status]["content"]["application/json"]["schema"]
                assert content == {"$ref": "#/components/schemas/ErrorOut"}, (where, status)


def test_the_document_is_generated_from_the_code(client):
    # Never hand-written: what is served is what the API object builds from the views and schemas now.
    built = json.loads(json.dumps(api.get_openapi_schema(path_prefix="/api/v1/")))
    assert served_document(client) == built


def test_the_browsable_docs_are_served_from_the_site_itself(client):
    page = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page and "cdn" not in page.lower()


def test_an_unknown_route_and_a_malformed_body_answer_typed_json(admin_client):
    response = admin_client.post("/api/v1/campaigns/preview", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request" and response.json()["reasons"]
    response = admin_client.post("/api/v1/campaigns/preview", "{}", content_type="application/json")
    body = response.json()
    assert (response.status_code, body["code"]) == (400, "invalid_request")
    # every missing field at once
    assert {r.split(":")[0] for r in body["reasons"]} == {"body.plan.benchmark", "body.plan.policy", "body.plan.tasks"}


def test_what_django_answers_before_the_api_is_json_too(admin_client, settings):
    unknown = admin_client.get("/api/v1/no/such/route")
    assert unknown.status_code == 404 and unknown["Content-Type"] == "application/json"
    assert unknown.json() == {
        "code": "not_found",
        "reasons": ["no such route: /api/v1/no/such/route (the routes are in /api/v1/openapi.json)"],
    }
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = admin_client.post(
        "/api/v1/campaigns/preview", json.dumps({"tasks": ["x" * 2000]}), content_type="application/json"
    )
    assert big.status_code == 400 and big.json()["code"] == "bad_request"
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in big.json()["reasons"][0]


@override_settings(ROOT_URLCONF=__name__)
def test_a_fault_of_the_server_is_a_json_500_that_hides_the_fault(db):
    response = Client(raise_request_exception=False).get("/api/v1/fault")
    assert response.status_code == 500
    assert response.json() == {"code": "server_error", "reasons": ["a fault of the server: it is logged"]}
