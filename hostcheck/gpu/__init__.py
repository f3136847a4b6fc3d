"""What hostcheck reads about NVIDIA GPUs besides the PCI bus (hostcheck/pci.py): NVML through
pynvml (nvml.py) and torch's CUDA build from its installed files (torch_probe.py). The gpu check
(hostcheck/checks/gpu.py) turns them into findings."""
