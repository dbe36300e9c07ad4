"""deltamark's state as Delta tables: the plain state model (``model``), the tables'
schemas and migrations (``schemas``), the store that reads and writes them with delta-rs
(``store``) and read-only SQL over them (``sql``). Import the module you need: this
package imports nothing on its own, so reading a model class costs no Delta engine."""
