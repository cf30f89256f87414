"""Moving threads in and out: Parquet export (``export``) and import from the official
LangGraph savers' databases (``official``)."""
