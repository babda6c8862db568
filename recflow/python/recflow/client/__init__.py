"""Sessions: running graphs from Python."""
