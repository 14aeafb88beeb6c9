"""Continuous-batching step planner and fair queues. Plain Python: never imports torch."""
