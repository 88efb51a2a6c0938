"""Request handlers, one package per area of the API; no view imports another (what views share
is in web/replies, web/intake and web/schemas)."""
