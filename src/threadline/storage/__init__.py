"""The storage engine: pure row mapping, per-backend SQL, sans-IO operations, runners."""
