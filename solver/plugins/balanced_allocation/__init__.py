"""NodeResourcesBalancedAllocation: a score only."""
