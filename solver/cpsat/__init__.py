"""CP-SAT engine: the window model, its hint, decomposition and the solve beside greedy."""
