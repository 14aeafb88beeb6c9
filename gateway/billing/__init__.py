"""Usage and cost: one usage row per request (with its journal), reports, the real per-token cost."""
