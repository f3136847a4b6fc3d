"""`hostcheck job`: the data-wait of an unmodified training job (runner, assess, command)."""
