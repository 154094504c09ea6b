"""Task generators: fresh tasks of each family in the basic suite, each with its gold solution."""
