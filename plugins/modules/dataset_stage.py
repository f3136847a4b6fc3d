#!/usr/bin/python
# ruff: noqa: E402  (an Ansible module: its documentation comes before its imports)
"""Stage a dataset onto a node's local file system so that no file under its final name is ever
partial or unverified, and keep a record of what is there."""

from __future__ import annotations

DOCUMENTATION = r"""
module: dataset_stage
short_description: Copy a dataset onto local storage, verified, resumable, never half-written
description:
  - C(copy) stages every file of I(source) (or exactly the files of I(manifest)) into I(dest).
    Each file is written to a temporary C(.<name>.staging-<8 chars>) next to its final name,
    hashed while it is written (and, with I(verify_written), again from disk), fsync'ed and
    only then renamed; a killed run leaves temporaries, which the next run removes.
  - Destination files already in place are trusted when their size and mtime match the record
    of the last run (I(verify=changed)) or hashed (I(verify=all)); a mismatch is recopied.
    Files at I(dest) that are not part of the dataset are counted, never removed.
  - Nothing is copied unless the file system of I(dest) has room for all of it.
  - C(plan) (the dataset is on the controller) writes the files still needed to I(files_from)
    for C(rsync --files-from); C(commit) verifies what rsync pushed into I(incoming) and moves
    it into place; C(measure) only counts files and bytes; C(manifest) (run on the controller)
    checksums a source into I(manifest) and I(sizes), reading again only files whose size or
    mtime changed since the last run (cache in I(state_dir)); C(sizes) writes I(sizes) for
    the files of a given I(manifest).
  - Records are kept in I(state_dir) as C(<name>.json) and C(<name>.sha256); the latter exists
    only while I(dest) matches it completely (C(cd dest && sha256sum -c ...) passes).
options:
  name:
    description: Dataset name, used in messages and in the names of the state files.
    type: str
    required: true
  mode:
    description: What to do.
    type: str
    choices: [copy, plan, commit, measure, manifest, sizes]
    default: copy
  source:
    description: Directory on the node holding the dataset. Required for copy and measure.
    type: path
  dest:
    description: Destination directory. Required except for measure.
    type: path
  manifest:
    description:
      - Checksums in C(sha256sum) output format (with the I(checksum) algorithm), relative
        paths. When given, exactly its files are staged and each must match.
      - Required for plan and commit.
    type: path
  state_dir:
    description: Where the records are kept. Required except for measure.
    type: path
  checksum:
    description: A hashlib algorithm from hashlib.algorithms_guaranteed (not shake).
    type: str
    default: sha256
  parallel:
    description: Number of files copied or hashed at once.
    type: int
    default: 4
  verify:
    description: C(changed) trusts destination files matching the last run's record, C(all)
      hashes every destination file.
    type: str
    choices: [changed, all]
    default: changed
  verify_written:
    description: Drop each written file from the page cache and hash it again before renaming.
    type: bool
    default: true
  incoming:
    description: For commit, the directory (on the file system of I(dest)) rsync pushed into.
    type: path
  files_from:
    description: For plan, where the relative paths still needed are written, one per line.
    type: path
  sizes:
    description:
      - For plan when I(source) is not on the node, C(<bytes>  <relative/path>) lines (as from
        C(find . -type f -printf '%s  %P\n')) giving the sizes for the free-space check.
    type: path
  dry_run:
    description:
      - For copy, plan and commit, change nothing and say what I(mode) would do, as in check
        mode (copy and commit return I(would_copy_files) and I(would_copy_bytes)). Refused for
        manifest and sizes, which write their files in check mode too.
      - The dataset_staging role's verify action asks a copy this way whether a staged dataset
        is complete, whether or not the run is in check mode.
    type: bool
    default: false
author: hostcheck maintainers (@hostcheck)
"""

EXAMPLES = r"""
- name: Copy a dataset to local NVMe, resuming where an earlier copy stopped
  hostcheck.gpu_hosts.dataset_stage:
    mode: copy
    name: imagenet
    source: /mnt/nfs/imagenet
    dest: /data/imagenet
    state_dir: /data/.staging
"""

RETURN = r"""
files_total:
  description: Files in the dataset.
  type: int
  returned: always
bytes_total:
  description: Bytes in the dataset.
  type: int
  returned: always
files_copied:
  description: Files written (copy) or moved into place (commit).
  type: int
  returned: copy, commit
bytes_copied:
  description: Their bytes.
  type: int
  returned: copy, commit
files_skipped:
  description: Files already in place and intact.
  type: int
  returned: copy, plan, commit
files_verified:
  description: Files hashed at the destination (or in incoming), plus read-backs of written files.
  type: int
  returned: copy, plan, commit
recopied_corrupt:
  description: Destination files that did not match and were (or are to be) replaced, first 50.
  type: list
  returned: copy, plan, commit
changed_at_source:
  description: Files whose wanted content changed since they were staged.
  type: int
  returned: copy, plan, commit
temps_removed:
  description: Temporaries of killed runs removed (and, for commit, leftovers in incoming).
  type: int
  returned: copy, plan, commit
extra_files:
  description: Files at the destination that are not part of the dataset (left alone).
  type: int
  returned: copy, plan, commit
to_copy:
  description: For plan, the relative paths still needed (first 1000).
  type: list
  returned: plan
would_copy_files:
  description: Files copy would write or commit would move into place.
  type: int
  returned: copy and commit with dry_run or in check mode
would_copy_bytes:
  description: Their bytes.
  type: int
  returned: copy and commit with dry_run or in check mode
summary:
  description: One line for humans.
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostcheck.gpu_hosts.plugins.module_utils.dataset_stage import (
    MODES,
    VERIFY,
    StagingError,
    stage,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "mode": {"type": "str", "choices": list(MODES), "default": "copy"},
            "source": {"type": "path"},
            "dest": {"type": "path"},
            "manifest": {"type": "path"},
            "state_dir": {"type": "path"},
            "checksum": {"type": "str", "default": "sha256"},
            "parallel": {"type": "int", "default": 4},
            "verify": {"type": "str", "choices": list(VERIFY), "default": "changed"},
            "verify_written": {"type": "bool", "default": True},
            "incoming": {"type": "path"},
            "files_from": {"type": "path"},
            "sizes": {"type": "path"},
            "dry_run": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    try:
        result = stage(module.params, check_mode=module.check_mode)
    except StagingError as error:
        error.result.pop("warnings", None)
        error.result.pop("changed", None)
        module.fail_json(msg=str(error), **error.result)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
