"""``threadline demo`` — placeholder module, replaced by the demo work."""
