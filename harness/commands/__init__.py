"""Harness commands that are more than a training or evaluation loop (attention, ...)."""
