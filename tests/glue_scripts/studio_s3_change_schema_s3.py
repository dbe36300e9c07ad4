import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from awsglue.context import GlueContext
from awsglue.job import Job

args = getResolvedOptions(sys.argv, ["JOB_NAME", "source", "target"])
sc = SparkContext()
glueContext = GlueContext(sc)
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args["JOB_NAME"], args)

# Script generated for node Amazon S3
AmazonS3_node1 = glueContext.create_dynamic_frame.from_options(format_options={"multiline": False}, connection_type="s3", format="json", connection_options={"paths": [args["source"]], "recurse": True}, transformation_ctx="AmazonS3_node1")

# Script generated for node Change Schema
ChangeSchema_node2 = ApplyMapping.apply(frame=AmazonS3_node1, mappings=[("id", "string", "id", "long"), ("amount", "string", "amount", "double")], transformation_ctx="ChangeSchema_node2")

# Script generated for node Amazon S3
AmazonS3_node3 = glueContext.getSink(path=args["target"], connection_type="s3", updateBehavior="UPDATE_IN_DATABASE", partitionKeys=[], enableUpdateCatalog=True, transformation_ctx="AmazonS3_node3")
AmazonS3_node3.setCatalogInfo(catalogDatabase="sales", catalogTableName="orders")
AmazonS3_node3.setFormat("glueparquet", compression="snappy")
AmazonS3_node3.writeFrame(ChangeSchema_node2)
job.commit()
