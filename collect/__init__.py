"""Collect stage: runs experiments on a GPU and writes JSON into data/runs/<run-id>/.

Importing this package (and `collect.schema`) must not import torch: render/ imports the schema.
"""
