"""Voice data both tiers read: the ChatTTS speaker format (validated by the web tier, used by the
engine) and the stored built-in voices."""
