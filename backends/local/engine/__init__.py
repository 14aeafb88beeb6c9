"""The engine: the async front, the synchronous core step, its configuration and composition root, outputs, metrics."""
