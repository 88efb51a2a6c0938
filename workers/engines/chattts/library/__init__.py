"""ChatTTS's own code path (`Chat.infer`) and the hooks it needs: refinement and
`CHATTTS_RUNTIME=library`."""
