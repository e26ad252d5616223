"""worldsmith: verified data-analysis tasks and the agents trained on them."""

__version__ = "0.1.0"
