"""Recall and recommend: the one hybrid scorer, task families, action clusters, attempts.

Kept empty of imports: importing one module of this package loads no other.
"""
