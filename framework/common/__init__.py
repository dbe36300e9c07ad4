"""Helpers that import no other framework module: sizes and durations in words,
secrets kept out of messages, injected faults, the version.
"""
