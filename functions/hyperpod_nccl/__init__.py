"""hyperpod-nccl: read-only NCCL diagnosis for SageMaker HyperPod (CLI and serverless monitor)."""

__version__ = "0.1.0"
