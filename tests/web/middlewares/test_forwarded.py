"""Behind a trusted proxy the limits count the client's address and cookies are Secure over
TLS; from any other peer the forwarding headers change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from core.infra.settings import Settings
from tests.conftest import ClientFactory

LIMITED = {"submit_rate_per_address": 0.001, "submit_burst_per_address": 1}
JOB = {"text": "Forwarded.", "voice": "en_male"}


async def submit_from(client: Any, forwarded_for: str, proto: str = "http") -> Any:
    headers = {"X-Forwarded-For": forwarded_for, "X-Forwarded-Proto": proto}
    return await client.post("/v1/tts/jobs", json=JOB, headers=headers)


async def test_a_trusted_proxy_names_each_client(make_client: ClientFactory) -> None:
    client = await make_client(trusted_proxies="127.0.0.0/8", **LIMITED)
    # The client's own X-Forwarded-For entry (left of the proxy's) is not believed.
    first = await submit_from(client, "198.51.100.1, 203.0.113.7", "https")
    assert first.status == 202, await first.text()
    assert "Secure" in first.headers["Set-Cookie"]
    other = await submit_from(client, "198.51.100.2, 203.0.113.8")
    assert other.status == 202 and "Secure" not in other.headers["Set-Cookie"]
    again = await submit_from(client, "198.51.100.3, 203.0.113.7")  # the same client address
    assert again.status == 429 and "from this address" in (await again.json())["error"]["message"]
    # A chain of trusted proxies: the right-most address none of them is.
    chained = await submit_from(client, "203.0.113.9, 127.0.0.5, 127.0.0.6")
    assert chained.status == 202


async def test_headers_from_any_other_peer_change_nothing(make_client: ClientFactory) -> None:
    client = await make_client(trusted_proxies="10.0.0.0/8", **LIMITED)
    first = await submit_from(client, "203.0.113.7", "https")
    assert first.status == 202 and "Secure" not in first.headers["Set-Cookie"]
    rotated = await submit_from(client, "203.0.113.8")  # the peer is still 127.0.0.1
    assert rotated.status == 429


def test_a_bad_proxy_list_names_the_entry() -> None:
    assert len(Settings.of(trusted_proxies="10.0.0.0/8, 192.0.2.1,").web.proxy_networks) == 2
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a CIDR"):
        Settings.of(trusted_proxies="10.0.0.0/33")
