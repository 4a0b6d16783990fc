"""Secret redaction, ``<private>`` removal and size caps (stdlib only; the hook path imports it).

Kept empty of imports: importing one module of this package loads no other.
"""
