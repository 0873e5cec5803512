"""Evaluation: exact match and token accuracy of a model on a task's splits (`evaluate`)."""
