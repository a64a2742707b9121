"""ImageLocality: a score only."""
