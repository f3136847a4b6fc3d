# The cuda_check role's variables as options of its validate and verify actions: generated
# from roles/cuda_check/meta/argument_specs.yml by docs/role_variables.py; do not edit.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  cuda_check_enabled:
    description: Run this role at all.
    type: bool
    default: true
  cuda_check_venv:
    description: The training venv (absolute path); its python imports torch and pynvml.
    type: str
    default: '{{ training_venv | default(''/opt/venvs/train'') }}'
  cuda_check_without_driver:
    description: What a host without an NVIDIA driver gets.
    type: str
    default: skip
    choices:
    - fail
    - skip
  cuda_check_min_driver_version:
    description: Oldest NVIDIA driver allowed, dotted digits ("" for any).
    type: str
    default: ''
  cuda_check_min_cuda_version:
    description: CUDA version the driver must support at least ("" for any).
    type: str
    default: ''
  cuda_check_toolkit_version:
    description: CUDA toolkit version that must be installed ("" for none).
    type: str
    default: ''
  cuda_check_cudnn_version:
    description: cuDNN version that must be on the host ("" for none).
    type: str
    default: ''
  cuda_check_torch_cuda_version:
    description: CUDA version torch in cuda_check_venv must be built for ("" for any).
    type: str
    default: ''
  cuda_check_require_torch_cuda:
    description: On a host with a driver, fail when torch in the venv has no CUDA build.
    type: bool
    default: true
  cuda_check_toolkit_paths:
    description: Folders that are a CUDA toolkit or hold cuda/ and cuda-*/ toolkits.
    type: list
    elements: str
    default:
    - /usr/local
  cuda_check_cudnn_include_paths:
    description: Folders searched for cuDNN headers ([] for the OS's usual ones).
    type: list
    elements: str
    default: []
  cuda_check_cudnn_library_paths:
    description: Folders searched for libcudnn.so.* ([] for the OS's usual ones).
    type: list
    elements: str
    default: []
"""
