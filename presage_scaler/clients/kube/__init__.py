"""A small async Kubernetes API client: exactly the calls presage makes."""
