"""The special-category word scorer: training (`train.py`) and run time (`scorer.py`), an experiment
kept out of the detector (`models/special-scorer/README.md`)."""
