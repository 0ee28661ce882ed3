"""A kube-scheduler extender served as a Google Cloud Function (2nd gen)."""

__version__ = "0.1.0"
