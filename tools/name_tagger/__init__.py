"""Training side of the person-name tagger (`policies/persons/tagger.py` runs it)."""
