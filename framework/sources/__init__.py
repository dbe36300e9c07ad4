"""Sources jobs read incrementally: one module per kind (``files``; more to come)."""
