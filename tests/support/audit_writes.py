"""Run the hostcheck CLI with an audit hook that logs every attempt to change the file system
and every program started. Usage: python audit_writes.py LOG -- hostcheck-args..."""

import json
import os
import sys

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CHANGES = {
    "os.mkdir",
    "os.rename",
    "os.replace",
    "os.remove",
    "os.rmdir",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.symlink",
    "os.link",
    "os.utime",
    "os.chflags",
    "os.setxattr",
    "os.removexattr",
    "shutil.rmtree",
    "shutil.copyfile",
    "shutil.move",
}
SPAWNS = {"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork"}


def main() -> int:
    log_path = sys.argv[1]
    argv = sys.argv[3:]
    events = []

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writing and isinstance(path, (str, bytes)):
                events.append(["write", os.fsdecode(os.path.abspath(path))])
        elif event in CHANGES:
            events.append(
                [
                    event,
                    [os.fsdecode(a) if isinstance(a, (str, bytes)) else repr(a) for a in args[:2]],
                ]
            )
        elif event in SPAWNS:
            events.append([event, repr(args[1] if len(args) > 1 else args)])

    sys.addaudithook(hook)
    from hostcheck.cli import main as cli_main

    code = cli_main(argv)
    with open(log_path, "w") as handle:  # opened after the run: its own write is not logged
        json.dump({"exit_code": code, "events": events}, handle)
    return code


if __name__ == "__main__":
    sys.exit(main())
