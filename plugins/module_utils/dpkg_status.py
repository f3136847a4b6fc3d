"""dpkg's database as `dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n'` (QUERY) prints it:
a line per package (per architecture), its name and the three letters of its status
(dpkg-query(1)): the wanted action, the state ("i" installed; "H", "U", "F", "W" and "t" left
unfinished) and the error flag ("R": reinstall required, a blank for none). Read the same way
by the os_packages_missing and package_manager_ready modules. Standard library only: it runs on
the hosts."""

QUERY = ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n"]


def dpkg_states(output):
    """(package, state, error flag) of each line of QUERY's output; "" for a letter missing."""
    states = []
    for line in output.splitlines():
        name, dummy, status = line.partition(" ")
        states.append((name, status[1:2], status[2:3]))
    return states
