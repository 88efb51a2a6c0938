"""The speakers a loaded engine resolves voices to, and the tool that drew the built-in ones."""
