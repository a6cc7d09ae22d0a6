"""Loopback servers speaking real provider wire formats, for tests."""
