"""Pure decisions, no I/O: sensitivity (KVKK) detection, routing rules, priority classes."""
