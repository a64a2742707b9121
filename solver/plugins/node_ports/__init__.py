"""NodePorts: host ports free on the node (filter and CP-SAT encoding)."""
