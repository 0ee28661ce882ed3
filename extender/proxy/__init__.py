"""The identity proxy: lets kube-scheduler, which cannot send a token, call a function that keeps IAM on.

It listens on loopback beside the scheduler and forwards each call with a
Google ID token for the function in ``Authorization: Bearer``.
"""
