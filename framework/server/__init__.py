"""deltamark servers: one warm Spark JVM shared by the deltamark commands they fork.

A workflow run starts a private server, so its jobs start Spark once; ``deltamark server
start`` keeps one between runs, which ``deltamark run`` and workflow runs then use. See
``framework.server.process`` for what a server does, ``framework.server.wire`` for how
it is found. On Spark Connect there is no JVM to keep: a workflow's jobs run as processes
of their own (``launcher``).
"""

from framework.server.client import (
    CommandProcess,
    Launcher,
    Server,
    ServerProcess,
    driver_memory,
    find_server,
    launcher,
    private_server,
    running_servers,
    start_server,
)

__all__ = ["CommandProcess", "Launcher", "Server", "ServerProcess", "driver_memory",
           "find_server", "launcher", "private_server", "running_servers", "start_server"]
