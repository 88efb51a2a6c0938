"""Request handlers, one module per area of the API."""
