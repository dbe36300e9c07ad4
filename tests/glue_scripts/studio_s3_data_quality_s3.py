import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from awsglue.context import GlueContext
from awsglue.job import Job
from awsgluedq.transforms import EvaluateDataQuality

args = getResolvedOptions(sys.argv, ['JOB_NAME', 'source', 'target', 'rejected'])
sc = SparkContext()
glueContext = GlueContext(sc)
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args['JOB_NAME'], args)

# Default ruleset used by all target nodes with data quality enabled
DEFAULT_DATA_QUALITY_RULESET = """
    Rules = [
        ColumnCount > 0
    ]
"""

# Script generated for node Amazon S3
AmazonS3_node1700000000001 = glueContext.create_dynamic_frame.from_options(format_options={"quoteChar": "\"", "withHeader": True, "separator": ",", "optimizePerformance": False}, connection_type="s3", format="csv", connection_options={"paths": [args["source"]], "recurse": True}, transformation_ctx="AmazonS3_node1700000000001")

# Script generated for node Change Schema
ChangeSchema_node1700000000002 = ApplyMapping.apply(frame=AmazonS3_node1700000000001, mappings=[("order_id", "string", "order_id", "long"), ("status", "string", "status", "string"), ("amount", "string", "amount", "double")], transformation_ctx="ChangeSchema_node1700000000002")

# Script generated for node Evaluate Data Quality
EvaluateDataQuality_node1700000000003_ruleset = """
    # Example rules: Completeness "colA" between 0.4 and 0.8, ColumnCount > 10
    Rules = [
        ColumnCount = 3,
        Completeness "order_id" > 0.5
    ]
"""

EvaluateDataQuality_node1700000000003 = EvaluateDataQuality().process_rows(frame=ChangeSchema_node1700000000002, ruleset=EvaluateDataQuality_node1700000000003_ruleset, publishing_options={"dataQualityEvaluationContext": "EvaluateDataQuality_node1700000000003", "enableDataQualityResultsPublishing": True}, additional_options={"observations.scope": "ALL", "performanceTuning.caching": "CACHE_NOTHING"})

assert EvaluateDataQuality_node1700000000003[EvaluateDataQuality.DATA_QUALITY_RULE_OUTCOMES_KEY].filter(lambda x: x["Outcome"] == "Failed").count() == 0, "The job failed due to failing DQ rules for node: ChangeSchema_node1700000000002"

# Script generated for node originalData
originalData_node1700000000011 = SelectFromCollection.apply(dfc=EvaluateDataQuality_node1700000000003, key="originalData", transformation_ctx="originalData_node1700000000011")

# Script generated for node Evaluate Data Quality
EvaluateDataQuality_node1700000000012_ruleset = """
    Rules = [
        IsComplete "order_id",
        ColumnValues "amount" between 0 and 10000,
        ColumnValues "status" in ["new", "paid", "shipped"],
        RowCount > 0
    ]
"""

EvaluateDataQuality_node1700000000012 = EvaluateDataQuality().process_rows(frame=originalData_node1700000000011, ruleset=EvaluateDataQuality_node1700000000012_ruleset, publishing_options={"dataQualityEvaluationContext": "EvaluateDataQuality_node1700000000012", "enableDataQualityResultsPublishing": True}, additional_options={"observations.scope": "ALL", "performanceTuning.caching": "CACHE_NOTHING"})

# Script generated for node rowLevelOutcomes
rowLevelOutcomes_node1700000000004 = SelectFromCollection.apply(dfc=EvaluateDataQuality_node1700000000012, key="rowLevelOutcomes", transformation_ctx="rowLevelOutcomes_node1700000000004")

# Script generated for node Passed
Passed_node1700000000005 = Filter.apply(frame=rowLevelOutcomes_node1700000000004, f=lambda row: (row["DataQualityEvaluationResult"] == "Passed"), transformation_ctx="Passed_node1700000000005")

# Script generated for node Failed
Failed_node1700000000006 = Filter.apply(frame=rowLevelOutcomes_node1700000000004, f=lambda row: (row["DataQualityEvaluationResult"] == "Failed"), transformation_ctx="Failed_node1700000000006")

# Script generated for node Drop Fields
DropFields_node1700000000007 = DropFields.apply(frame=Passed_node1700000000005, paths=["DataQualityRulesPass", "DataQualityRulesFail", "DataQualityRulesSkip", "DataQualityEvaluationResult"], transformation_ctx="DropFields_node1700000000007")

# Script generated for node Amazon S3
EvaluateDataQuality().process_rows(frame=DropFields_node1700000000007, ruleset=DEFAULT_DATA_QUALITY_RULESET, publishing_options={"dataQualityEvaluationContext": "EvaluateDataQuality_node1700000000008", "enableDataQualityResultsPublishing": True}, additional_options={"dataQualityResultsPublishing.strategy": "BEST_EFFORT", "observations.scope": "ALL"})
AmazonS3_node1700000000009 = glueContext.getSink(path=args["target"], connection_type="s3", updateBehavior="UPDATE_IN_DATABASE", partitionKeys=[], enableUpdateCatalog=True, transformation_ctx="AmazonS3_node1700000000009")
AmazonS3_node1700000000009.setCatalogInfo(catalogDatabase="sales", catalogTableName="orders")
AmazonS3_node1700000000009.setFormat("glueparquet", compression="snappy")
AmazonS3_node1700000000009.writeFrame(DropFields_node1700000000007)

# Script generated for node Amazon S3
AmazonS3_node1700000000010 = glueContext.write_dynamic_frame.from_options(frame=Failed_node1700000000006, connection_type="s3", format="json", connection_options={"path": args["rejected"], "partitionKeys": []}, transformation_ctx="AmazonS3_node1700000000010")
job.commit()
