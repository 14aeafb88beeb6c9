"""Offline corpus, tokenizer and training of fairgate's demo model pair."""
