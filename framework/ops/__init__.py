"""Operator actions on jobs and their state (docs/operations.md), and the metrics.
"""
