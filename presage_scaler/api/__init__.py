"""The presage API (``scaling.presage.sh/v1alpha1``): declaration, parsing, CRD and doc generation."""
