"""Embedders: fastembed MiniLM (offline, W8A8) and the hash embedder for tests.

Kept empty of imports: importing one module of this package loads no other.
"""
