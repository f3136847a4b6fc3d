"""Open files, locked memory and processes: of this process, of a user's login, of services."""

from __future__ import annotations

from hostcheck import config as c
from hostcheck import limits as lim
from hostcheck import units
from hostcheck._shared import limits_text
from hostcheck._shared.sizes import format_size
from hostcheck.checks.base import CheckContext, CheckSpec
from hostcheck.model import CheckResult, Finding, Status
from hostcheck.system import System

FIX = "ansible-playbook site.yml --tags ulimits"
SCOPES = ("process", "login", "systemd")
# Shell-independent: dash (Debian's /bin/sh) has no `ulimit -u`, and on bash `ulimit -l`
# is KiB; /proc/self/limits of a child of the login shell gives all three in kernel units.
# Profile scripts may print first: the table starts at its header line.
LOGIN_COMMAND = "cat /proc/self/limits"
HEADER = "Limit                     Soft Limit"
LOGIN_PAM_SERVICE = "runuser-l"

_MEMLOCK = c.nullable(c.SIZE_OR_UNLIMITED)
SCHEMA = c.obj(
    {
        "user": c.nullable({"type": "string", "minLength": 1}),
        "scopes": {"type": "array", "items": {"enum": list(SCOPES)}, "uniqueItems": True},
        "min_nofile_soft": c.nullable(c.LIMIT),
        "min_nofile_hard": c.nullable(c.LIMIT),
        "min_memlock_soft": _MEMLOCK,
        "min_memlock_hard": _MEMLOCK,
        "min_nproc_soft": c.nullable(c.LIMIT),
        "min_nproc_hard": c.nullable(c.LIMIT),
        "pam_services": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z0-9._-]+$"},
        },
    }
)


# --- thresholds and display ------------------------------------------------------------------


def parse_minimum(item: str, value: object) -> lim.Limit | None:
    """A profile minimum; memlock is bytes or a size (64MiB), never KiB as in limits.conf."""
    if value is None:
        return None
    if item == "memlock":
        return units.parse_size_or_unlimited(value)
    return units.parse_limit(value)


def minimums(cfg: dict) -> dict[tuple[str, str], lim.Limit | None]:
    return {
        (item, kind): parse_minimum(item, cfg.get(f"min_{item}_{kind}"))
        for item in limits_text.ITEMS
        for kind in limits_text.KINDS
    }


def show(item: str, value: lim.Limit) -> str:
    if item == "memlock" and value != units.UNLIMITED:
        return format_size(value)
    return lim.limit_text(value)


def judge(value: lim.Limit, minimum: lim.Limit | None) -> Status:
    """Unlimited meets any minimum; a missing minimum is not checked."""
    if minimum is None or value >= minimum:
        return Status.PASS
    return Status.FAIL


def limit_findings(
    scope: str,
    values: dict[str, dict[str, lim.Limit]],
    mins: dict[tuple[str, str], lim.Limit | None],
    sources: dict[tuple[str, str], str],
    remedy: str,
) -> list[Finding]:
    """One finding per item and kind; `remedy` has a {vars} slot for the role variables
    of every failing value in this scope, so the scope has one remedy."""
    findings = []
    for item in limits_text.ITEMS:
        for kind in limits_text.KINDS:
            name = f"{scope} {item} {kind}"
            source = sources.get((item, kind), "")
            if kind not in values.get(item, {}):
                findings.append(
                    Finding(name, Status.ERROR, None, display="not reported", source=source)
                )
                continue
            value = values[item][kind]
            minimum = mins[(item, kind)]
            findings.append(
                Finding(
                    name,
                    judge(value, minimum),
                    lim.limit_raw(value),
                    f">= {show(item, minimum)}" if minimum is not None else "no minimum set",
                    display=show(item, value),
                    source=source,
                    unit="bytes" if item == "memlock" else "",
                )
            )
    failing = [f for f in findings if f.status == Status.FAIL]
    names = ", ".join("ulimits_" + "_".join(f.name.split()[1:]) for f in failing)
    for finding in failing:
        finding.remedy = remedy.replace("{vars}", names)
    return findings


def raw_values(values: dict[str, dict[str, lim.Limit]]) -> dict:
    return {item: {k: lim.limit_raw(v) for k, v in kinds.items()} for item, kinds in values.items()}


# --- this process --------------------------------------------------------------------------------


def status_field(system: System, name: str) -> list[str]:
    for line in (system.read("/proc/self/status") or "").splitlines():
        key, _, rest = line.partition(":")
        if key == name:
            return rest.split()
    return []


def parent_name(system: System) -> str:
    ppid = status_field(system, "PPid")
    if not ppid:
        return "an unknown parent"
    comm = system.read_value(f"/proc/{ppid[0]}/comm")
    return f"{comm or '?'}, pid {ppid[0]}"


def effective_uid(system: System) -> int | None:
    uids = status_field(system, "Uid")
    return int(uids[1]) if len(uids) > 1 and uids[1].isdigit() else None


def check_process(system: System, mins: dict) -> tuple[list[Finding], dict]:
    text = system.read("/proc/self/limits")
    if text is None:
        return [Finding("process", Status.ERROR, None, display="cannot read /proc/self/limits",
                        source="/proc/self/limits")], {}  # fmt: skip
    values = lim.proc_items(text)
    parent = parent_name(system)
    source = f"this process (inherited from {parent})"
    remedy = (
        "set {vars} (role ulimits) and run: " + FIX + "; then start the job "
        f"from a fresh login or service: this process inherited its limits from {parent}"
    )
    sources = {(i, k): source for i in limits_text.ITEMS for k in limits_text.KINDS}
    findings = limit_findings("process", values, mins, sources, remedy)
    return findings, {"parent": parent, "limits": raw_values(values)}


# --- a login of a named user ---------------------------------------------------------------------


def find_user(system: System, name: str) -> lim.UserInfo | None:
    info = lim.lookup_user(name, system.read("/etc/passwd") or "", system.read("/etc/group") or "")
    if info is not None:
        return info
    # Users from LDAP/SSSD are not in /etc/passwd: ask NSS for this one user.
    entry = system.run(["getent", "passwd", name])
    if entry is None or entry.returncode != 0:
        return None
    found = lim.lookup_user(name, entry.stdout, "")
    if found is None:
        return None
    names = system.run(["id", "-Gn", name])
    gids = system.run(["id", "-G", name])
    return lim.UserInfo(
        name,
        found.uid,
        found.gid,
        frozenset(names.stdout.split() if names and names.returncode == 0 else ()),
        frozenset(
            int(g)
            for g in (gids.stdout.split() if gids and gids.returncode == 0 else ())
            if g.isdigit()
        )
        | {found.gid},
    )


def limits_lines(system: System) -> tuple[list[lim.LimitsLine], list[str]]:
    lines, files = [], []
    for path in lim.limits_conf_files(system.glob):
        text = system.read(path)
        if text is None:
            continue
        files.append(path)
        lines += lim.parse_limits_conf(text, path)
    return lines, files


def login_source(
    base: str,
    item: str,
    kind: str,
    measured: lim.Limit | None,
    resolution: lim.Resolution,
    pam_limits: bool,
) -> str:
    if not pam_limits:
        return f"{base}: pam_limits.so not in /etc/pam.d/{LOGIN_PAM_SERVICE}, limits.conf unused"
    if resolution.disabled_by is not None:
        line = resolution.disabled_by
        return f"{base}: {line.where} ('{line.domain} -': pam_limits sets no limits)"
    setting = resolution.get(item, kind)
    if setting is None:
        return f"{base}: no entry in limits.conf or limits.d (the session's default)"
    text = f"{base}: {setting.line.where}"
    if measured is not None and measured != setting.value:
        text += (
            f" asks {show(item, setting.value)} but the session has {show(item, measured)}"
            " (a hard limit it may not exceed, a failed setrlimit, or a profile script)"
        )
    return text


def check_login(ctx: CheckContext, mins: dict) -> tuple[list[Finding], dict]:
    system = ctx.system
    user = ctx.options.user or ctx.config.get("user")
    if not user:
        reason = "no user named: give --user NAME or set ulimits.user in the profile"
        return [Finding("login", Status.SKIP, None, display=reason)], {"skipped": reason}
    uid = effective_uid(system)
    if uid != 0:
        reason = (
            f"reading a login of {user} through PAM (runuser -l) needs root; "
            f"running as uid {uid if uid is not None else 'unknown'}"
        )
        return [Finding("login", Status.SKIP, None, display=reason)], {"skipped": reason}
    if system.which("runuser") is None:
        reason = "runuser (util-linux) not found: cannot open a PAM login session"
        return [Finding("login", Status.SKIP, None, display=reason)], {"skipped": reason}
    info = find_user(system, user)
    if info is None:
        return [
            Finding(f"login {user}", Status.ERROR, None, "an existing user",
                    display=f"no such user: {user}", source="/etc/passwd, getent passwd",
                    remedy="check --user / ulimits.user, or create the user")
        ], {"user": user, "error": "no such user"}  # fmt: skip
    argv = ["runuser", "-l", "-s", "/bin/sh", "-c", LOGIN_COMMAND, user]
    done = system.run(argv, timeout=20)
    if done is None or done.returncode != 0 or HEADER not in done.stdout:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1] if done else "not run"
        return [
            Finding(f"login {user}", Status.FAIL, why, "a login session opens",
                    display=f"login failed: {why}", source=" ".join([*argv[:2], user]),
                    remedy=f"a limit in limits.conf may exceed what the kernel allows "
                    f"(nofile above fs.nr_open); fix ulimits_* (role ulimits) and run: {FIX}")
        ], {"user": user, "error": why}  # fmt: skip
    values = lim.proc_items(done.stdout.rsplit(HEADER, 1)[1])
    lines, files = limits_lines(system)
    nr_open = system.read_int("/proc/sys/fs/nr_open")
    resolution = lim.resolve_limits(lines, info, nr_open)
    pam = lim.uses_pam_limits(limits_text.pam_modules(LOGIN_PAM_SERVICE, _pam_reader(system)))
    base = f"login of {user} via runuser -l (PAM)"
    sources = {
        (i, k): login_source(base, i, k, values.get(i, {}).get(k), resolution, pam is not None)
        for i in limits_text.ITEMS
        for k in limits_text.KINDS
    }
    remedy = "set {vars} and list " + user + " in ulimits_users (role ulimits), then run: " + FIX
    findings = limit_findings("login", values, mins, sources, remedy)
    data = {
        "user": user,
        "uid": info.uid,
        "limits": raw_values(values),
        "files_read": files,
        "entries": {
            f"{i} {k}": (s.line.where if s else None)
            for i in limits_text.ITEMS
            for k in limits_text.KINDS
            for s in [resolution.get(i, k)]
        },
        "disabled_by": resolution.disabled_by.where if resolution.disabled_by else None,
        "pam_service": LOGIN_PAM_SERVICE,
        "pam_limits_in_service": pam is not None,
    }
    return findings, data


def _pam_reader(system: System):
    return lambda service: system.read(f"/etc/pam.d/{service}")


def check_pam(system: System, services: list[str]) -> tuple[list[Finding], dict]:
    """Which login services run pam_limits: without it limits.conf is ignored for them."""
    read = _pam_reader(system)
    state: dict[str, bool | None] = {}
    for service in services:
        if read(service) is None:
            state[service] = None
            continue
        state[service] = lim.uses_pam_limits(limits_text.pam_modules(service, read)) is not None
    present = [s for s, has in state.items() if has is not None]
    missing = [s for s, has in state.items() if has is False]
    if not present:
        return [Finding("pam_limits", Status.SKIP, None, display="none of "
                        f"{', '.join(services)} in /etc/pam.d")], state  # fmt: skip
    display = (
        f"missing from {', '.join(missing)}: limits.conf is ignored for those logins"
        if missing
        else f"in {', '.join(present)}"
    )
    finding = Finding(
        "pam_limits",
        Status.WARN if missing else Status.PASS,
        {s: has for s, has in state.items() if has is not None},
        f"session required pam_limits.so in {', '.join(present)}",
        display=display,
        source="/etc/pam.d (session stacks, following include, substack and @include)",
        remedy=f"add 'session required pam_limits.so' to /etc/pam.d/{', '.join(missing)} "
        f"(role ulimits, ulimits_users) and run: {FIX}",
    )
    return [finding], state


# --- systemd services ---------------------------------------------------------------------------


def check_systemd(system: System, mins: dict) -> tuple[list[Finding], dict]:
    if not system.exists("/run/systemd/system"):
        reason = "systemd is not the init system here (no /run/systemd/system)"
        return [Finding("systemd", Status.SKIP, None, display=reason)], {"skipped": reason}
    props = [
        limits_text.systemd_property(i, k) for i in limits_text.ITEMS for k in limits_text.KINDS
    ]
    argv = ["systemctl", "show", *[arg for p in props for arg in ("-p", p)]]
    done = system.run(argv)
    if done is None or done.returncode != 0:
        why = "systemctl not found" if done is None else (done.stderr.strip() or "failed")
        return [Finding("systemd", Status.ERROR, None, display=why, source="systemctl show")], {
            "error": why
        }
    shown = lim.parse_systemctl_show(done.stdout)
    values: dict[str, dict[str, lim.Limit]] = {}
    for item in limits_text.ITEMS:
        for kind in limits_text.KINDS:
            if limits_text.systemd_property(item, kind) in shown:
                values.setdefault(item, {})[kind] = shown[limits_text.systemd_property(item, kind)]
    files = lim.system_conf_files(system.exists, system.glob)
    settings = lim.merge_system_conf(
        lim.parse_system_conf(system.read(path) or "", path) for path in files
    )
    base = "systemd manager defaults (system.conf and system.conf.d drop-ins)"
    sources = {}
    for item in limits_text.ITEMS:
        setting = settings.get(item)
        for index, kind in enumerate(limits_text.KINDS):
            if setting is None or setting.value is None:
                where = f"built-in default, no DefaultLimit{limits_text.SYSTEMD_NAMES[item]}="
                sources[(item, kind)] = f"{base}: {where}"
                continue
            text = f"{base}: {setting.where}"
            wanted = setting.value[index]
            measured = values.get(item, {}).get(kind)
            if measured is not None and measured != wanted:
                text += (
                    f" sets {show(item, wanted)} but the manager has {show(item, measured)}"
                    " (not applied yet: systemctl daemon-reexec)"
                )
            sources[(item, kind)] = text
    remedy = (
        "set {vars} with ulimits_systemd_enabled: true (role ulimits; services "
        "ignore limits.conf) and run: " + FIX + ", then systemctl daemon-reexec and restart "
        "the service"
    )
    findings = limit_findings("systemd", values, mins, sources, remedy)
    data = {
        "limits": raw_values(values),
        "files_read": files,
        "settings": {i: s.where for i, s in settings.items()},
    }
    return findings, data


# --- the check --------------------------------------------------------------------------------


def run(ctx: CheckContext) -> CheckResult:
    cfg = ctx.config
    mins = minimums(cfg)
    scopes = cfg.get("scopes", list(SCOPES))
    findings: list[Finding] = []
    data: dict = {
        "minimums": {
            f"{i} {k}": (None if v is None else lim.limit_raw(v)) for (i, k), v in mins.items()
        }
    }
    if "process" in scopes:
        found, data["process"] = check_process(ctx.system, mins)
        findings += found
    if "login" in scopes:
        found, data["login"] = check_login(ctx, mins)
        findings += found
        found, data["pam_limits"] = check_pam(ctx.system, cfg.get("pam_services", []))
        findings += found
    if "systemd" in scopes:
        found, data["systemd"] = check_systemd(ctx.system, mins)
        findings += found
    if not findings:
        return CheckResult.skipped("ulimits", "no scope enabled in ulimits.scopes", data)
    return CheckResult.from_findings("ulimits", findings, data)


SPEC = CheckSpec(
    id="ulimits",
    title="Open files, locked memory and process limits",
    explain=(
        "Measures the soft and hard limits on open files (nofile), locked memory (memlock) "
        "and processes (nproc) in three places: this process (/proc/self/limits, inherited "
        "from whatever started it); a fresh login of the user given by --user or "
        "ulimits.user, opened through PAM with runuser -l as root, each value attributed to "
        "the limits.conf or limits.d line that sets it (pam_limits rules: user entries beat "
        "@group entries beat *, limits.d/*.conf read after limits.conf in name order, and "
        "* and @group do not apply to root); and the defaults systemd gives services "
        "(systemctl show DefaultLimitNOFILE/...Soft), which ignore limits.conf entirely and "
        "come from system.conf and system.conf.d drop-ins. It also reports login services "
        "whose PAM session stack lacks pam_limits.so, for which limits.conf is ignored. "
        "Each value is compared with the profile minimums; unlimited meets any minimum. "
        "DataLoader workers pass batches as shared-memory file descriptors, and every worker "
        "and its threads count against nproc, so low nofile/nproc end runs with 'Too many "
        "open files' or 'can't start new thread'. memlock does not limit pin_memory() (the "
        "CUDA driver pins) but does limit RDMA/NCCL memory registration on multi-node jobs."
    ),
    run=run,
    schema=SCHEMA,
    roles=("ulimits",),
)
