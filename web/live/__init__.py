"""Live sessions: text in as it is written (an LLM's answer), audio out from the first sentence."""
