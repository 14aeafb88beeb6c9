"""Speculative decoding: n-gram and draft-model proposers, the acceptance math, adaptive k."""
