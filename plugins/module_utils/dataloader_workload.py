"""The DataLoader sweep's workload on a host where a number is left at 0 (auto): the ranks per
node and the most workers a rank is given. `hostcheck loop --sweep` resolves them so, and the
hostcheck role plans the sweep and judges the settings file by them before hostcheck is
installed. This file is shared: the collection ships it as module_utils and the hostcheck
package as hostcheck._shared (pyproject.toml), so it uses the standard library only."""


def ranks_per_node(given, nvidia_gpus):
    """Ranks on a host: `given`, else (0 or None) one per NVIDIA GPU, 1 without."""
    return given or max(1, nvidia_gpus)


def sweep_max_workers(physical_cores, ranks):
    """The most num_workers the sweep tries for each rank: the physical cores shared among
    the ranks, at least 1."""
    return max(1, physical_cores // ranks)
