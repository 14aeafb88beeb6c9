"""What operators read: Prometheus metrics, the routing audit, `fairgate advise`."""
