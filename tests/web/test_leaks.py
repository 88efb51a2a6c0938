"""Small leaks a hostile client found: 500s with tracebacks, forged log lines, limits one endpoint
ignored, secrets in printed URLs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from cli.check import mask_url
from tests.conftest import ClientFactory

Client = TestClient[Any, Any]


async def test_a_long_static_path_is_a_404_and_forges_no_log_line(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = "/static/" + "a" * 300 + "%0aFORGED%20line"
    response = await client.get(path)
    body = await response.json()
    assert response.status == 404, body
    assert body["error"]["code"] == "unknown_endpoint"
    assert len(body["error"]["message"]) < 300
    for record in caplog.records:
        assert record.levelno < logging.ERROR, record.getMessage()
        assert not any(line.startswith("FORGED") for line in record.getMessage().splitlines())


async def test_openai_speech_keeps_the_servers_text_limit(make_client: ClientFactory) -> None:
    client = await make_client(max_text_chars=100)
    body = {"model": "tts-1", "voice": "alloy", "input": "word " * 40}
    response = await client.post("/v1/audio/speech", json=body)
    answer = await response.json()
    assert response.status == 400, answer
    assert "100" in answer["error"]["message"] and answer["error"]["param"] == "input"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:s3cret@db:6379/0", "redis://:***@db:6379/0"),
        ("redis://db:6379/0?password=s3cret&db=1", "redis://db:6379/0?password=***&db=1"),
        ("rediss://user:pw@db/0?ssl_cert_reqs=none", "rediss://user:***@db/0?ssl_cert_reqs=none"),
        ("redis://db:6379/0", "redis://db:6379/0"),
    ],
)
def test_printed_urls_hide_every_password(url: str, masked: str) -> None:
    assert mask_url(url) == masked


async def test_only_key_clients_may_jump_the_queue(make_client: ClientFactory) -> None:
    anonymous = await make_client()
    response = await anonymous.post("/v1/tts/jobs", json={"text": "Me first.", "priority": "high"})
    body = await response.json()
    assert response.status == 403 and body["error"]["code"] == "priority_not_allowed", body
    keyed = await make_client(api_keys="operator-key")
    response = await keyed.post(
        "/v1/tts/jobs",
        json={"text": "Me first.", "priority": "high"},
        headers={"Authorization": "Bearer operator-key"},
    )
    assert response.status == 202, await response.text()


async def test_snapshots_do_not_tell_the_traffic_volume(client: Client) -> None:
    """The queue-wide submission count stays on the server; the position is still there."""
    first = await (await client.post("/v1/tts/jobs", json={"text": "One."})).json()
    second = await (await client.post("/v1/tts/jobs", json={"text": "Two."})).json()
    assert "seq" not in first["job"] and "seq" not in second["job"]
    assert second["position"] == first["position"] + 1
    status = await (await client.get(second["status_url"])).json()
    assert "seq" not in status and status["position"] == second["position"]


async def test_metrics_and_readiness_can_be_private(make_client: ClientFactory) -> None:
    client = await make_client(api_keys="scraper-key", private_metrics=True)
    for path in ("/metrics", "/readyz"):
        assert (await client.get(path)).status == 401, path
        response = await client.get(path, headers={"Authorization": "Bearer scraper-key"})
        assert response.status in (200, 503), path  # 503: no worker is ready here
    assert (await client.get("/healthz")).status == 200


async def test_metrics_and_readiness_detail_answer_only_the_operators_networks(
    make_client: ClientFactory,
) -> None:
    """From loopback (the default's first range) the scrape answers; a client a trusted proxy
    relays from a public address gets 403 from /metrics and only the verdict from /readyz."""
    client = await make_client(trusted_proxies="127.0.0.1")
    assert (await client.get("/metrics")).status == 200
    local = await (await client.get("/readyz")).json()
    assert "workers" in local and "topology" in local, local

    public = {"X-Forwarded-For": "203.0.113.9"}
    response = await client.get("/metrics", headers=public)
    body = await response.json()
    assert response.status == 403, body
    assert body["error"]["code"] == "metrics_not_public"
    assert "CHATTTS_METRICS_NETWORKS" in body["error"]["message"]
    response = await client.get("/readyz", headers=public)
    assert response.status in (200, 503)
    assert await response.json() == {"status": "not_ready"}  # no worker here: not ready
    assert (await client.get("/healthz", headers=public)).status == 200

    # A private address is not an operator's by default (clients on a LAN have them too); a
    # named network is, and `*` opens both to everyone.
    private = {"X-Forwarded-For": "10.1.2.3"}
    assert (await client.get("/metrics", headers=private)).status == 403
    pods = await make_client(trusted_proxies="127.0.0.1", metrics_networks="10.0.0.0/8")
    assert (await pods.get("/metrics", headers=private)).status == 200
    opened = await make_client(trusted_proxies="127.0.0.1", metrics_networks="*")
    assert (await opened.get("/metrics", headers=public)).status == 200


async def test_a_bad_metrics_network_stops_the_start(make_client: ClientFactory) -> None:
    with pytest.raises(ValueError, match="CHATTTS_METRICS_NETWORKS"):
        await make_client(metrics_networks="10.0.0.0/8,not-a-network")
