"""How results look to a person: one function per result type, printing rich tables and trees.

``format`` holds the small text helpers (sizes, times, ids, folded values); ``reads``
renders the read models, ``changes`` the lifecycle and transfer reports.
"""
