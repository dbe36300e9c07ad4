"""An AWS Glue ETL script, written the way Glue's documentation writes them; only the
imports changed (awsglue -> framework.glue). Run it with:

    deltamark run --script jobs/glue_orders.py --arg JOB_NAME=glue_orders \
        --arg job-bookmark-option=job-bookmark-enable --arg orders_path=... \
        --arg documents_path=... --arg target=...

Two bookmarked sources (order batches and nested order documents), a Relationalize of the
documents, writes (orders as partitioned Parquet, the document tables as Delta), and
job.commit().
"""

import sys

from pyspark.context import SparkContext

from framework.glue.context import GlueContext
from framework.glue.job import Job
from framework.glue.transforms import Relationalize
from framework.glue.utils import getResolvedOptions

args = getResolvedOptions(sys.argv, ["JOB_NAME", "orders_path", "documents_path", "target"])
sc = SparkContext.getOrCreate()
glueContext = GlueContext(sc)  # noqa: N816 - as AWS Glue scripts name it
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args["JOB_NAME"], args)

orders = glueContext.create_dynamic_frame.from_options(
    connection_type="s3",
    connection_options={"paths": [args["orders_path"]], "recurse": True},
    format="json",
    transformation_ctx="orders_source",
)
orders = orders.select_fields(["order_id", "customer_id", "country", "amount"]) \
    .resolveChoice(specs=[("amount", "cast:double")])

documents = glueContext.create_dynamic_frame.from_options(
    connection_type="s3",
    connection_options={"paths": [args["documents_path"]], "recurse": True},
    format="json",
    transformation_ctx="documents_source",
)
tables = Relationalize.apply(frame=documents, staging_path="/tmp/glue-staging/",
                             name="documents", transformation_ctx="relationalize")

glueContext.write_dynamic_frame.from_options(
    frame=orders,
    connection_type="s3",
    connection_options={"path": args["target"] + "/orders", "partitionKeys": ["country"]},
    format="glueparquet",
    transformation_ctx="orders_sink",
)
for name in tables.keys():  # noqa: SIM118 (as Glue's documentation writes it)
    glueContext.write_dynamic_frame.from_options(
        frame=tables.select(name),
        connection_type="s3",
        connection_options={"path": args["target"] + "/" + name},
        format="delta",
        transformation_ctx=name + "_sink",
    )

job.commit()
