"""Shared test helpers: builders for real artifacts (model folders, tokenizers) used across suites."""
