"""Subcommands of the ``docmind`` CLI, one module per area; each exposes ``register(group, get_engine)``."""
