"""The commands of hostcheck: each module adds its parser and runs it (healthcheck and job
live with their packages: hostcheck/health/command.py, hostcheck/job/command.py)."""
