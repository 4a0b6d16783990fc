"""Operations on a whole store: backup and import, doctor, insights.

Kept empty of imports: importing one module of this package loads no other.
"""
