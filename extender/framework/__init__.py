"""The scheduling core, modelled on the Kubernetes scheduling framework.

Plugins implement small interfaces (filter, score, preempt); a profile runs
them over the candidate nodes and reports statuses, never wire formats.
"""
