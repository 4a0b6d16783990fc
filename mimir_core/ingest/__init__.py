"""The way in: the validate chokepoint, the spool and host-neutral capture (stdlib but validate).

Kept empty of imports: importing one module of this package loads no other.
"""
