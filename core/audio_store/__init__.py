"""Where finished audio lives when it is not in Redis: an object store the workers write and the
web tier reads, chosen by `CHATTTS_AUDIO_STORE` (`file:///path`). Redis keeps the references."""
