"""Where node facts come from when the scheduler sends node names only (nodeCacheCapable: true)."""
