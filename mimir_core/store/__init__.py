"""The LanceDB store and everything below it: typed filters, SQL, upkeep, integrity, locking.

Kept empty of imports: importing one module of this package loads no other.
"""
