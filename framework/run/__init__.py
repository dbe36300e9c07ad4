"""One run of a job, in order: its spec, the plan, the preflight that may skip it,
the job author's API (``IncrementalJob``, ``JobContext``), the commit and recovery.
"""
