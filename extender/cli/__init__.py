"""Command-line tools: one module per ``python -m extender`` command."""
