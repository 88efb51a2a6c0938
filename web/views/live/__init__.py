"""Live sessions over WebSocket: our own protocol, and those of the clients people run."""
