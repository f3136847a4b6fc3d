"""The commands of hostcheck: each module adds its parser (add_parser) and runs it (run), one
module a command (catalog: list and explain); common holds what they share, loop_runs what
`hostcheck loop` runs and shows. The work of a command lives in its package (hostcheck.health,
hostcheck.job, hostcheck.fleet, hostcheck.loop)."""
