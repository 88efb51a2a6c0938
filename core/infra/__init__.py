"""What every process stands on: settings, logging, Redis connections, the embedded server."""
