"""Background monitors of what the web tier depends on: the store, the backlog, the fleet."""
