"""The scheduling policy: which plugins run in which profile, with which args."""
