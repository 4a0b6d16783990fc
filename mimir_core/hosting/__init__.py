"""Helpers for host adapters only (conversations, turns, graph steps, runs, key-value).

Kept empty of imports: importing one module of this package loads no other.
"""
