"""`hostcheck healthcheck`: a fast verdict a cluster acts on (Slurm's HealthCheckProgram,
a node-problem-detector plugin), with the slow measurements taken from the last full report
while the host state they were measured on holds."""
