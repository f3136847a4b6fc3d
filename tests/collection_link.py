"""This checkout as the collection hostcheck.gpu_hosts: a link under .cache/collections, which
ansible.cfg names as the collections path, so ansible-playbook in the checkout finds the roles,
playbooks and plugins by their full names. Run by make and by the tests.

Usage: python3 -m tests.collection_link
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from tests.paths import CHECKOUT


def collection_name(checkout: Path = CHECKOUT) -> tuple[str, str]:
    galaxy = yaml.safe_load((checkout / "galaxy.yml").read_text())
    return galaxy["namespace"], galaxy["name"]


def ensure(checkout: Path = CHECKOUT) -> Path:
    namespace, name = collection_name(checkout)
    link = checkout / ".cache" / "collections" / "ansible_collections" / namespace / name
    target = os.path.relpath(checkout, link.parent)
    if link.is_symlink() and os.readlink(link) == target:
        return link
    link.parent.mkdir(parents=True, exist_ok=True)
    partial = link.with_name(f".{name}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    partial.symlink_to(target)
    os.replace(partial, link)  # atomic: parallel pytest workers may both get here
    return link


if __name__ == "__main__":
    print(ensure())
