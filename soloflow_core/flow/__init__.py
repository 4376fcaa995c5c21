"""Flows: templates, validation (DAG), executors."""
