"""Rows of ``python -m distla demo``, one module per capability."""
