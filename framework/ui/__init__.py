"""The operations page, ``deltamark ui``: what the state tables hold about jobs, runs,
bookmarks, data quality and workflows, for people (``pages`` gathers it, ``app`` serves
it with templates and charts shipped in the package) and as JSON for scripts."""
