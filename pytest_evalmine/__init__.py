"""pytest-evalmine: evaluate LLM model changes on your own tasks, inside pytest."""

__version__ = "0.1.0"
