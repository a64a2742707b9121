"""NodeUnschedulable: cordoned nodes take only pods tolerating it (filter)."""
