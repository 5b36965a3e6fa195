"""``presage scaledobject``'s work: the KEDA ScaledObject that hands a PredictiveScaler's workload to
presage. ``render`` turns a PredictiveScaler into the manifests (pure, no I/O); ``sources`` reads the
PredictiveScaler from the cluster, or from a file or stdin without one.
"""
