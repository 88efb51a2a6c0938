"""The service's own pages and probes: the demo page, the API document (`/openapi.json`,
`/docs`), `/healthz`, `/readyz` and `/metrics`."""
