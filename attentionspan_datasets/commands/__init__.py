"""Subcommands of the `attentionspan` CLI, one module each."""
