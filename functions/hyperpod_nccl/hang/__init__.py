"""Hang attribution: which rank, on which node, stopped a collective — from PyTorch Flight
Recorder dumps and NCCL RAS status, mapped to pods, nodes and instance ids."""
