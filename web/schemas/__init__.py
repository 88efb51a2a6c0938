"""Requests parsed and validated without I/O: synthesis jobs and OpenAI speech."""
