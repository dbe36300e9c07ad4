"""Targets other than Delta tables (Delta targets go through ``framework.delta``)."""
