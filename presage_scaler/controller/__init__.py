"""The Kubernetes edges around the evaluator: watch, evaluate, write status, elect a leader."""
