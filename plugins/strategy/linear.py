# ruff: noqa: E402  (an Ansible plugin: its documentation comes before its imports)
"""ansible.builtin.linear, with the controller's Jinja2 filter and test plugins loaded once."""

from __future__ import annotations

DOCUMENTATION = r"""
name: linear
short_description: ansible.builtin.linear, with the Jinja2 plugins loaded before the forks
description:
  - Runs a play exactly as C(ansible.builtin.linear) does, each task on every host before the
    next task.
  - >-
    Before the first task it loads ansible-core's own Jinja2 filter and test plugins into the
    controller. Ansible forks a worker per task and host, and each worker loads them again on
    the first filter or test it meets (a C(when) with C(| bool) is enough); in this
    collection's playbooks that was about a sixth of the controller's CPU time. Loaded before
    the forks, the workers inherit them.
  - The collection's playbooks use it (the C(strategy) of their plays); a play of yours can too.
author: hostcheck maintainers (@hostcheck)
"""

from ansible.plugins.loader import filter_loader, test_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule


class StrategyModule(LinearStrategyModule):
    def run(self, iterator, play_context):
        # a lookup of a builtin name loads every builtin plugin of its kind (ansible-core's
        # Jinja2Loader keeps them in the loader, which the forks inherit)
        filter_loader.get("bool")
        test_loader.get("match")
        return super().run(iterator, play_context)
