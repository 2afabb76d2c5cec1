"""The tensorflow backend."""
