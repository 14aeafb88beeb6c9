"""Training side of the person-name tagger (`policies/detection/persons/tagger.py` runs it)."""
