"""Routes: literal and {name} segments, decoding, conflicts."""

from __future__ import annotations

import pytest

from tickwheel_server.web.router import HttpError, Request, Response, Router


def handler(name: str):
    async def serve(request: Request) -> Response:
        return Response.text(name)

    serve.name = name
    return serve


@pytest.fixture
def router() -> Router:
    router = Router()
    router.get("/", handler("root"))
    router.get("/api/jobs", handler("jobs"))
    router.get("/api/jobs/{job_id}", handler("job"))
    router.get("/api/jobs/{job_id}/executions", handler("executions"))
    router.get("/metrics", handler("metrics"))
    return router


@pytest.mark.parametrize(
    ("path", "name", "params"),
    [
        ("/", "root", {}),
        ("/api/jobs", "jobs", {}),
        ("/api/jobs/job_01ABC", "job", {"job_id": "job_01ABC"}),
        ("/api/jobs/a%2Fb/executions", "executions", {"job_id": "a/b"}),  # %2F stays inside the segment
        ("/api/jobs/caf%C3%A9", "job", {"job_id": "café"}),
        ("/metrics", "metrics", {}),
    ],
)
def test_a_path_resolves_to_its_route_with_decoded_parameters(router, path, name, params) -> None:
    found, got = router.resolve(path)
    assert (found.name, got) == (name, params)


@pytest.mark.parametrize("path", ["/api", "/api/jobs/", "/api/jobs/x/y", "/API/jobs", "/metrics/", "/nothing"])
def test_anything_else_is_404(router, path) -> None:
    with pytest.raises(HttpError) as error:
        router.resolve(path)
    assert error.value.status == 404


@pytest.mark.parametrize("segment", ["%2E%2E", ".", "%00", "a%0Ab", "%FF"])
def test_a_segment_that_decodes_to_a_dot_segment_a_control_character_or_bad_utf8_is_400(router, segment) -> None:
    with pytest.raises(HttpError) as error:
        router.resolve(f"/api/jobs/{segment}")
    assert error.value.status == 400


@pytest.mark.parametrize(
    "pattern",
    ["/api/jobs/{other}", "/api/jobs/lateness", "/api/{what}/x/executions", "/metrics"],
)
def test_a_route_that_would_match_the_paths_of_another_is_refused(router, pattern) -> None:
    with pytest.raises(ValueError, match="overlaps"):
        router.get(pattern, handler("second"))


@pytest.mark.parametrize("pattern", ["no-slash", "/a/{x}/{x}", "/a/{X}", "/a/b c", "/a/..", "/a//b"])
def test_malformed_patterns_are_refused(pattern) -> None:
    with pytest.raises(ValueError):
        Router().get(pattern, handler("x"))


def test_responses_encode_json_and_text() -> None:
    response = Response.json({"name": "<b>é</b>"}, 404)
    assert (response.status, response.content_type, response.body) == (
        404, "application/json", '{"name":"<b>é</b>"}'.encode())  # fmt: skip
    assert HttpError(418, "short and stout").response().body == b"short and stout\n"
