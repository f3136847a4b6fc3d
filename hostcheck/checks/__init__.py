"""One module per check, a package where the check has helpers of its own (storage, pillow);
the table of all checks is hostcheck.registry."""
