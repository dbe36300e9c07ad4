"""The Spark session of a command that a deltamark server forked: a session of its own in
the server's JVM (its SQL conf, temporary views and functions are its own; the
SparkContext, cached data and the JVM's memory are shared)."""

from __future__ import annotations

import logging
import os

from py4j.finalizer import ThreadSafeFinalizer
from pyspark import SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from framework.server.client import spark_gateway

__all__ = ["release_session", "session_in_server"]

log = logging.getLogger("deltamark.spark")


class SharedContext(SparkContext):
    """The server's SparkContext as a command sees it: the server's other commands share
    it, so ``stop()`` leaves it running."""

    def stop(self) -> None:
        log.info("spark.stop(): this Spark is the deltamark server's, shared with its other "
                 "commands; it goes on")


def session_in_server() -> SparkSession:
    """This command's session in the JVM of the server that forked it, through the gateway
    the server gives (port, secret, and the tag its Spark jobs carry so the server can
    cancel them). Once per process: later calls return the same session.

    Raises:
        ServerError: the server could not start its JVM.
    """
    if (attached := SparkSession.getActiveSession()) is not None:
        return attached
    gateway = spark_gateway()
    connection = {"PYSPARK_GATEWAY_PORT": str(gateway["port"]),
                  "PYSPARK_GATEWAY_SECRET": gateway["secret"]}
    os.environ.update(connection)
    try:
        java = launch_gateway()  # connects to the running JVM the environment names
    finally:  # not for the processes this one starts
        for name in connection:
            del os.environ[name]
    jvm = java.jvm
    shared = jvm.org.apache.spark.sql.SparkSession.builder().getOrCreate()
    context = SharedContext(gateway=java, jsc=jvm.JavaSparkContext(shared.sparkContext()))
    context.addJobTag(gateway["tag"])
    context.setInterruptOnCancel(True)
    return SparkSession(context, jsparkSession=shared.newSession())


def release_session() -> None:
    """Free the JVM objects this command still holds, its session, DataFrames and plans
    among them (call it as it ends). py4j frees a JVM object when its proxy here is
    collected, through a queue that a thread of this process empties; a process that ends
    does neither, and the server's JVM would keep them for good (~2 MB a job)."""
    context = SparkContext._active_spark_context
    if not isinstance(context, SharedContext):
        return
    gateway = context._gateway
    assert gateway is not None  # set when the context was made (session_in_server)
    client = gateway._gateway_client
    targets = [proxy._target_id for ref in list(ThreadSafeFinalizer.finalizers.values())
               if (proxy := ref()) is not None]
    ThreadSafeFinalizer.clear_finalizers(clear_all=True)
    while True:  # what was collected and is not freed yet
        try:
            queued = client.finalizer_deque.pop()
        except IndexError:
            break
        if isinstance(queued, tuple):  # (client, target id); else the worker's stop mark
            targets.append(queued[1])
    for target in targets:
        client.garbage_collect_object(target, enqueue=False)
