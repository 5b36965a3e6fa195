"""Answering KEDA (gRPC external scaler) and Agones (FleetAutoscaler webhook) from the recommendation
store; the store itself, which the controller fills."""
