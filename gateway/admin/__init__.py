"""Admin REST (Bearer admin token): tenants, keys, quotas, backends, pools, routing, usage, costs, advice."""
