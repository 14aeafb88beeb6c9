"""Configuration: the declarative file (apply, export), the backend registry, stored pools and routes, the config bus, fairness weights pushed to engines."""
