"""The synthetic training loop: proof that this host can feed its GPUs.

One module per job: `settings` (the loop's shape, no torch), `theory` (the arithmetic the
measurements are checked against, no torch), `dataset` (samples with a real or calibrated
cost), `device` (the CPU/CUDA layer: transfer, prefetcher, compute step), `workers` (worker
processes that never outlive hostcheck, failures as verdicts), `monitor` (/dev/shm, open
files and worker CPU while the loop runs), `measure` (one configuration), `sweep` (many
configurations and a recommendation), `bandwidth` (host-to-device copies, CUDA only) and
`plot` (the sweep as a PNG, with matplotlib when installed).

Nothing in this package imports torch at module level except `dataset`, `device`,
`measure` and `bandwidth`, which only the loop itself imports: `hostcheck run --profile quick`
never pays for torch.
"""
