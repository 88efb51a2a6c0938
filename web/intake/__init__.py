"""Requests read and admitted: bodies within their limits and in time, voice registrations, and
submissions checked against the voices the queue knows (web/schemas validates without I/O)."""
