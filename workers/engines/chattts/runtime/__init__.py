"""Our own decode runtime over ChatTTS's weights: a static-cache decoder, per-row sampling,
continuous batching over slots, and audio decoded chunk by chunk as tokens arrive."""
