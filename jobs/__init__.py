"""Example jobs built on deltamark."""
