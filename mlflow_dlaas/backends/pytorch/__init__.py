"""The pytorch backend."""
