"""Pay table data files: one JSON document per pay table version."""
