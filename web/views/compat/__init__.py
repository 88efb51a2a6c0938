"""Other services' APIs over the same queue: OpenAI's speech and lists, Kokoro-FastAPI's
captioned speech, and the seed-era submit and poll."""
