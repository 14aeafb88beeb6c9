"""The engine's OpenAI face: `fairgate engine`'s HTTP server, the in-process `LocalBackend`, request preparation, choices, tools, embeddings."""
