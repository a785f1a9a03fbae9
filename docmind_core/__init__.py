"""DocMind core: ingestion, hybrid retrieval and the agentic answer pipeline (no UI imports)."""

__version__ = "0.1.0"
