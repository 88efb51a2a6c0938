"""The request middlewares: errors in one shape, cross-site guards, access log, request metrics."""
