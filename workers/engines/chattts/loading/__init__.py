"""Loading ChatTTS: weights found, fetched and verified, modules built around their tensors."""
