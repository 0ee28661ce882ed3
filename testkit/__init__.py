"""Test support shared by the test suite and the benchmark: kube-scheduler's answer checks, certificates, a fake
Kubernetes API server. Nothing here ships with the function."""
