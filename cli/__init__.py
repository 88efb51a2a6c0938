"""The `chattts-online` console commands: the client, the supervisor of `run`, and `check`."""
