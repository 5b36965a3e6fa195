"""presage: a predictive autoscaler for Kubernetes."""
