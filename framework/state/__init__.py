"""The state tables as the framework reads and writes them (delta-rs, no Spark), and
the Watermarks API.
"""
