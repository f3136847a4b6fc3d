"""Whether someone other than root can change what root runs: a program, the folders above it
and, for a Python venv, every file its interpreter may import. The hostcheck role asks before
it lets root run hostcheck from the training venv on a schedule (the timer, Slurm's health
check), and the hostcheck commands root runs ask the same at start. This file is shared: the
collection ships it as module_utils and the hostcheck package as hostcheck._shared
(pyproject.toml), so it uses the standard library only.

A path is safe when it and every folder above it are owned by root and writable by no one
else: not by a group other than root's, not by everyone (except a folder with the sticky bit,
where others cannot rename or remove what root owns, like /tmp). A symbolic link is followed,
and its target must be safe too."""

import grp
import os
import pwd
import stat

ROOT = 0


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def entry_problem(path, st, sticky_ok=True):
    """Why others can change this one entry (one line), or None. `st` is its lstat."""
    if st.st_uid != ROOT:
        return f"{path} is owned by {_user(st.st_uid)}"
    if stat.S_ISLNK(st.st_mode):
        return None  # a link's own mode means nothing; its target is checked
    if st.st_mode & stat.S_IWGRP and st.st_gid != ROOT:
        return f"{path} is writable by group {_group(st.st_gid)}"
    if st.st_mode & stat.S_IWOTH:
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and sticky_ok:
            return None
        return f"{path} is writable by everyone"
    return None


def chain_problems(path, lstat=os.lstat, readlink=os.readlink, seen=None):
    """Problems of a path and of every folder above it, following symbolic links."""
    seen = set() if seen is None else seen
    absolute = os.path.abspath(path)
    if absolute in seen:
        return []
    seen.add(absolute)
    problems = []
    parts = absolute.strip("/").split("/") if absolute != "/" else []
    current = "/"
    for index in range(len(parts) + 1):
        if index:
            current = os.path.join(current, parts[index - 1])
        try:
            st = lstat(current)
        except FileNotFoundError:
            return [*problems, f"{current} does not exist"]
        last = index == len(parts)
        problem = entry_problem(current, st, sticky_ok=not last)
        if problem:
            problems.append(problem)
        if stat.S_ISLNK(st.st_mode):
            target = os.path.join(os.path.dirname(current), readlink(current))
            rest = parts[index:]
            problems += chain_problems(os.path.join(target, *rest), lstat, readlink, seen)
            return problems
    return problems


def tree_problems(folder, most=20):
    """Problems of every entry under a folder (the folder's own chain excluded), at most
    `most` of them, without following links out of it: what a venv's interpreter imports."""
    problems = []
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            problem = entry_problem(path, st, sticky_ok=False)
            if problem:
                problems.append(problem)
                if len(problems) >= most:
                    return problems
    return problems


def venv_problems(venv, program="bin/hostcheck"):
    """Why root should not run `program` of this venv: the venv's folder chain, its
    interpreter (through its links), the program, and everything under the venv."""
    return venv_problems_chains(venv, program) + tree_problems(venv)


def program_problems(program, venv=None):
    """Why root should not run this program on a schedule, for a role deciding before it
    installs anything: with a venv (given, or the folder above the program's when it has a
    pyvenv.cfg) the full walk of the venv; otherwise the program's chain and that of the
    interpreter its first line names. A path that does not exist yet is judged by the nearest
    folder above it that does: the role creates the rest as root."""
    if venv is None:
        above = os.path.dirname(os.path.dirname(program))
        venv = above if os.path.isfile(os.path.join(above, "pyvenv.cfg")) else None
    if venv is not None:
        if not os.path.lexists(venv):
            return chain_problems(nearest_existing(venv))
        relative = os.path.relpath(program, venv)
        return venv_problems(venv, relative)
    if not os.path.lexists(program):
        return chain_problems(nearest_existing(program))
    problems = chain_problems(program)
    interpreter = _shebang(program)
    if interpreter:
        problems += [p for p in chain_problems(interpreter) if p not in problems]
    return problems


def startup_problems(venv, program="bin/hostcheck", package_dir=None):
    """The quick part of venv_problems, for a command root runs often (Slurm's health check):
    the chains of the venv, its interpreter and the program, each site-packages folder and
    what the interpreter runs at every start there (.pth files, sitecustomize, usercustomize),
    and the package's own tree (package_dir: where it was imported from, an editable install's
    checkout; default site-packages/hostcheck). What the full walk adds: the other packages'
    files."""
    problems = venv_problems_chains(venv, program)
    for site in _site_packages(venv):
        for name in sorted(os.listdir(site)):
            if name.endswith(".pth") or name.split(".")[0] in ("sitecustomize", "usercustomize"):
                path = os.path.join(site, name)
                problem = entry_problem(path, os.lstat(path), sticky_ok=False)
                if problem:
                    problems.append(problem)
        own = os.path.join(site, "hostcheck")
        if package_dir is None and os.path.isdir(own):
            problems += tree_problems(own)
    if package_dir is not None:
        problems += [p for p in chain_problems(package_dir) if p not in problems]
        problems += tree_problems(package_dir)
    return problems


def venv_problems_chains(venv, program):
    problems = chain_problems(venv)
    for inside in (os.path.join(venv, "bin", "python"), os.path.join(venv, program)):
        problems += [p for p in chain_problems(inside) if p not in problems]
    for site in _site_packages(venv):
        problems += [p for p in chain_problems(site) if p not in problems]
    return problems


def nearest_existing(path):
    """The path itself or the nearest folder above it that exists."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def first_and_count(problems):
    """The first problem and how many more, for a one-line message."""
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


def _shebang(program):
    """The interpreter a script's #! line names (its first word), or None."""
    try:
        with open(program, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    return words[0] if words and words[0].startswith("/") else None


def _site_packages(venv):
    lib = os.path.join(venv, "lib")
    found = []
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        site = os.path.join(lib, name, "site-packages")
        if name.startswith("python") and os.path.isdir(site):
            found.append(site)
    return found
