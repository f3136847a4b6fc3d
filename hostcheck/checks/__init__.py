"""One module per check; the table of all checks is hostcheck.registry."""
