"""CDK app of the serverless monitor."""
