"""One module per verb: each opens the repository, calls the library, returns data."""
