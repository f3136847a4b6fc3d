"""`hostcheck job`: the data-wait of an unmodified training job (runner, assess; the command is
hostcheck.commands.job)."""
