"""The tools Mimir offers a model: specs, models, argument io, serving, the one fence, rendering.

Kept empty of imports: importing one module of this package loads no other.
"""
