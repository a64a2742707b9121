"""NodeResourcesFit: requests fit what the node has left (filter and CP-SAT encoding), and
the LeastAllocated / MostAllocated score."""
