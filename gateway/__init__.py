"""The fairgate gateway: Starlette app, auth, quotas, admin REST, usage, metrics, CLI."""
