"""Training side of the special-category word scorer (`policies/detection/special_scorer.py` runs it)."""
