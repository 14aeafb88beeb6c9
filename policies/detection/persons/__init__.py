"""People as they are written in Turkish text: name lexicons, a small learned token tagger run
in numpy, and the rules around it (titles, relations, Turkish case suffixes)."""
