# The nvidia_driver role's variables as options of its validate and verify actions: generated
# from roles/nvidia_driver/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  nvidia_driver_enabled:
    description: Apply this role at all.
    type: bool
    default: true
  nvidia_driver_skip_without_gpu:
    description: Skip hosts with no NVIDIA GPU on the PCI bus.
    type: bool
    default: true
  nvidia_driver_branch:
    description: Driver branch, its three-digit major version.
    type: raw
    default: '570'
  nvidia_driver_source:
    description: Ubuntu's packages (distribution) or NVIDIA's CUDA repository (cuda).
    type: str
    default: auto
    choices:
    - auto
    - distribution
    - cuda
  nvidia_driver_kernel_modules:
    description: Open or proprietary kernel modules.
    type: str
    default: open
    choices:
    - open
    - proprietary
  nvidia_driver_module_build:
    description: Modules built on the host by DKMS, or precompiled for the running kernel.
    type: str
    default: dkms
    choices:
    - dkms
    - precompiled
  nvidia_driver_allow_branch_change:
    description: Move a host from another installed branch to nvidia_driver_branch.
    type: bool
    default: false
  nvidia_driver_packages:
    description: Driver packages instead of the role's table.
    type: list
    elements: str
    default: []
  nvidia_driver_cuda_repo_url:
    description: CUDA repository URL; empty for NVIDIA's.
    type: str
    default: ''
  nvidia_driver_cuda_repo_key_url:
    description: URL of the repository's signing key; empty for NVIDIA's.
    type: str
    default: ''
  nvidia_driver_hold:
    description: Hold the driver packages (apt-mark hold, dnf versionlock).
    type: bool
    default: true
  nvidia_driver_blacklist_nouveau:
    description: Blacklist nouveau and rebuild the initramfs.
    type: bool
    default: true
  nvidia_driver_persistenced:
    description: Enable nvidia-persistenced where systemd runs.
    type: bool
    default: true
  nvidia_driver_fabric_manager:
    description: Fabric Manager of the driver's version; auto where NVSwitches are present.
    type: raw
    default: auto
    choices:
    - auto
    - true
    - false
  nvidia_driver_modules_signed:
    description: The modules are signed by a key the firmware trusts by other means.
    type: bool
    default: false
  nvidia_driver_mok_key:
    description: Private key on the host DKMS signs the modules with under Secure Boot.
    type: str
    default: ''
  nvidia_driver_mok_cert:
    description: Its enrolled certificate (DER) on the host.
    type: str
    default: ''
  nvidia_driver_reboot_ok:
    description: Reboot when the loaded module differs from the installed driver.
    type: bool
    default: false
  nvidia_driver_reboot_timeout:
    description: Seconds to wait for the host after the reboot.
    type: int
    default: 900
  nvidia_driver_reboot_command:
    description: Reboot command; empty for the reboot module's.
    type: str
    default: ''
  nvidia_driver_fail_if_reboot_required:
    description: Fail the host when a reboot is needed and not done.
    type: bool
    default: false
  nvidia_driver_package_lock_timeout:
    description: Seconds to wait, before installing packages, for another process (apt-daily,
      unattended-upgrades, dnf-makecache) to release the package manager's locks; then the
      play fails naming the holder.
    type: int
    default: 600
"""
