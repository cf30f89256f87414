"""A ``search`` filter evaluated in Python on decoded values, for stores that cannot ask their
database (the Redis store): ``storage.jsonfilter.compile_filter``, the terms every backend
expresses, given the SQL stores' meaning (see that module for the operators)."""

from __future__ import annotations

from threadline.storage.jsonfilter import Predicate, compile_filter

__all__ = ["Predicate", "compile_filter"]
