import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.gluetypes import *
from awsglue import DynamicFrame

def _null_field_paths(ctx, schema, path, found, null_strings, null_numbers, frame):
    if isinstance(schema, StructType):
        for field in schema:
            prefix = path + "." if path != "" else path
            found = _null_field_paths(ctx, field.dataType, prefix + field.name, found, null_strings, null_numbers, frame)
    elif isinstance(schema, ArrayType):
        if isinstance(schema.elementType, StructType):
            found = _null_field_paths(ctx, schema.elementType, path, found, null_strings, null_numbers, frame)
    elif isinstance(schema, NullType):
        found.append(path)
    else:
        values = set()
        for row in frame.toDF().select(path).distinct().collect():
            value = row[path.split('.')[-1]]
            if isinstance(value, list):
                values |= set([v.strip() if isinstance(v, str) else v for v in value])
            elif isinstance(value, str):
                values.add(value.strip())
            else:
                values.add(value)
        if isinstance(schema, StringType):
            if values.issubset(null_strings):
                found.append(path)
        elif isinstance(schema, IntegerType) or isinstance(schema, LongType) or isinstance(schema, DoubleType):
            if values.issubset(null_numbers):
                found.append(path)
    return found

def drop_nulls(glueContext, frame, nullStringSet, nullIntegerSet, transformation_ctx) -> DynamicFrame:
    nullColumns = _null_field_paths(frame.glue_ctx, frame.schema(), "", [], nullStringSet, nullIntegerSet, frame)
    return DropFields.apply(frame=frame, paths=nullColumns, transformation_ctx=transformation_ctx)

args = getResolvedOptions(sys.argv, ['JOB_NAME', 'source', 'target'])
sc = SparkContext()
glueContext = GlueContext(sc)
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args['JOB_NAME'], args)

# Script generated for node Amazon S3
AmazonS3_node1714600000001 = glueContext.create_dynamic_frame.from_options(format_options={"multiLine": "false"}, connection_type="s3", format="json", connection_options={"paths": [args["source"]], "recurse": True}, transformation_ctx="AmazonS3_node1714600000001")

# Script generated for node Drop Null Fields
DropNullFields_node1714600000002 = drop_nulls(glueContext, frame=AmazonS3_node1714600000001, nullStringSet={"", "null"}, nullIntegerSet={-1}, transformation_ctx="DropNullFields_node1714600000002")

# Script generated for node Amazon S3
AmazonS3_node1714600000003 = glueContext.write_dynamic_frame.from_options(frame=DropNullFields_node1714600000002, connection_type="s3", format="json", connection_options={"path": args["target"], "partitionKeys": []}, transformation_ctx="AmazonS3_node1714600000003")

job.commit()
