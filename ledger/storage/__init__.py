"""Storage of run records as commits on the experiments branch."""
