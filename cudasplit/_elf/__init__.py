"""ELF files: read them (``read/``), plan their edits (``plan/``), write the edits (``patch/``).

Imports run ``patch -> plan -> read``; nothing here knows about archives, rules or outputs:
the split loop hands the planner values and applies what it returns.
"""
