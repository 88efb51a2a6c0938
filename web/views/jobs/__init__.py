"""The jobs API (`/v1/tts/jobs`): submit, list, read and cancel jobs; their audio, segments,
stream and subtitles; their events over SSE and the WebSocket; the callbacks' secret."""
