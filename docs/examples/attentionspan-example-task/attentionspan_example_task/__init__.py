"""An AttentionSpan task from a package of its own (docs/own_task.md): string rotation.

The task module, `rotation`, is what the entry point names; nothing here imports it, so
that AttentionSpan alone decides when it is loaded.
"""
