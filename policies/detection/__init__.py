"""The personal-data detectors behind `policies.sensitivity.classify`: identifiers with their checksums and
layouts, people (the name tagger in persons/), addresses, KVKK special categories tied to a person,
institutions' lines, tenant patterns; their lexicons and weights in data/."""
