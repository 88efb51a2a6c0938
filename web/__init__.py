"""aiohttp web tier: HTTP API, SSE, WebSocket and the demo page. Never runs a model."""
