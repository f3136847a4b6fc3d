"""torchvision's datasets and transforms next to the CPU build of torch.

The PyPI torchvision wheel (0.28.0, the one for torch 2.13.0) is built against CUDA torch: its
C++ ops library (torchvision/_C.so) cannot load next to CPU torch, and `import torchvision`
then fails in the fake-op registrations of `torchvision._meta_registrations` and
`torchvision._autograd_registrations` ("operator torchvision::nms does not exist"). The
ImageFolder job needs only the pure-Python parts, which work when those two modules are
empty. Put this folder on PYTHONPATH: when torchvision imports them and its ops did not load,
they are replaced by empty modules. When the ops load, this does nothing.
"""

import importlib.abc
import importlib.machinery
import sys

EMPTY = ("torchvision._meta_registrations", "torchvision._autograd_registrations")


class _EmptyModule(importlib.abc.Loader):
    def create_module(self, spec):
        return None  # the default: an empty module

    def exec_module(self, module):
        pass


class _SkipRegistrations(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        extension = sys.modules.get("torchvision.extension")  # imported before both
        if name not in EMPTY or extension is None or extension._has_ops():
            return None
        return importlib.machinery.ModuleSpec(name, _EmptyModule())


sys.meta_path.insert(0, _SkipRegistrations())
