"""deltamark's state as Delta tables: the plain state model (``model``), the tables'
schemas and migrations (``schemas``), the store that reads and writes them through the
table I/O it is given (``store``; ``framework.state.table_io.open_store`` gives it delta-rs) and
read-only SQL over them (``sql``). This package imports nothing of ``framework`` and
nothing on its own: import the module you need."""
