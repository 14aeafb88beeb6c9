"""Backends: the local paged engine and OpenAI-compatible servers, behind one protocol."""
