"""Clients of what presage reads: the Kubernetes API (``kube``) and Prometheus, on one aiohttp stack."""
