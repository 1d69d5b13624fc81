"""pytest plugin entry point (filled by the gate issue)."""
