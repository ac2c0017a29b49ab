"""One headless Chromium per render: unprivileged, in its own process group, fresh profile, bounded.

Playwright for Python drives it (its node driver speaks the DevTools protocol over a pipe; no
browser is downloaded: ``executable_path`` is a launcher script that starts the system's chromium).
The launcher is written per render, and does what Playwright cannot:

- drops to an unprivileged user (``nobody``) when the worker runs as root, with no supplementary
  groups (``setpriv``), so a renderer exploit owns a user with nothing to read or write;
- sets resource limits on every process of the browser (``prlimit``): CPU seconds (a page that
  spins forever is killed by the kernel even if the worker is busy), open files, no core dumps;
- records the browser's process id, which is also its process group (Playwright starts it
  detached), so the whole tree is killed at the end of the render, whatever state it is in.

A watchdog samples the resident memory of the tree and kills it past the bound; V8's heap is
capped too, so a page that allocates without end usually crashes its own renderer first.

Every flag that could open a way around the egress proxy is set (``FLAGS``): WebRTC may use no UDP
that is not proxied (there is none), QUIC is off, the browser resolves no name itself (every name
goes to the proxy in a CONNECT; a local lookup, as DNS prefetch would do, maps to nothing), and
background networking, component updates, crash reporting, safe browsing, sync, extensions,
popups and notifications are off. ``--proxy-bypass-list=<-loopback>`` removes Chromium's implicit
bypass for loopback, so even 127.0.0.1 goes through the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Playwright

log = logging.getLogger("research.render")

UNPRIVILEGED_UID = 65534  # nobody
UNPRIVILEGED_GID = 65534  # nogroup
MAX_OPEN_FILES = 4096
# The browser's whole environment is ours (none of the worker's variables, secrets included, reach
# a process that runs pages): the system's folders only; the launcher names its tools by path.
BROWSER_PATH = "/usr/local/bin:/usr/bin:/bin"
WATCH_INTERVAL_S = 0.2

FLAGS = (
    "--disable-quic",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--enforce-webrtc-ip-permission-check",
    # Every name goes to the proxy unresolved; the rules map anything the browser would resolve
    # itself to nothing, except the proxy's own address (rules match IP literals too).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--dns-prefetch-disable",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-notifications",
    "--deny-permission-prompts",
    "--block-new-web-contents",
    "--no-pings",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-features=NetworkPrediction,PreloadMediaEngagementData,MediaRouter,"
    "OptimizationHints,Translate,InterestFeedContentSuggestions,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,WebTransport,SpeculationRules,Prerender2",
)
# Playwright's own defaults that would undo one of ours.
IGNORED_DEFAULTS = ["--disable-popup-blocking"]


def cpu_seconds(seconds: float) -> int:
    """The CPU time every process of a browser may use, for a render of ``seconds``."""
    return int(seconds) + 2


@dataclass
class Launched:
    """A started browser: its Playwright context and its private folder (profile, launcher, pid)."""

    context: BrowserContext
    home: Path
    born: float  # time.monotonic() at the end of its launch
    closed: bool = False  # Playwright lost the browser (it died, or was killed)

    def __post_init__(self) -> None:
        self.context.on("close", lambda _: setattr(self, "closed", True))

    @property
    def pid_file(self) -> Path:
        return self.home / "browser.pid"

    def alive(self) -> bool:
        """Its browser process runs (it can die idle: the OOM killer, a crash, an operator's kill)."""
        pid = _browser_pid(self.pid_file)
        if pid is None or self.closed:
            return False
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")


class BrowserMissing(Exception):
    """The configured chromium cannot be found or run."""


def find_chromium(configured: str) -> str:
    """The browser's path: RESEARCH_CHROMIUM as a path, or a name looked up on PATH."""
    found = configured if os.sep in configured else shutil.which(configured)
    if found is None or not os.access(found, os.X_OK):
        raise BrowserMissing(f"RESEARCH_CHROMIUM: {configured!r} is not an executable browser")
    return found


def certutil() -> str | None:
    return shutil.which("certutil")


@dataclass(frozen=True)
class Limits:
    seconds: float  # the render's wall clock
    memory_bytes: int  # resident memory of the whole tree


@dataclass
class Watch:
    pid: int | None = None  # the browser's, which is also its process group's
    peak_bytes: int = 0
    killed_for_memory: bool = False


class BrowserLauncher:
    """Launches one browser per render, built once per render worker."""

    def __init__(self, chromium: str, ca_bundle: str | None) -> None:
        self._chromium = find_chromium(chromium)
        self._ca_bundle = ca_bundle
        self._drop = os.geteuid() == 0
        self.sandboxed: bool | None = None  # Chromium's own sandbox: known after the first launch
        self._prlimit, self._setpriv = shutil.which("prlimit"), shutil.which("setpriv")
        if self._prlimit is None or self._setpriv is None:
            raise BrowserMissing("rendering needs prlimit and setpriv (util-linux) to bound the browser")
        self._trust_store: Path | None = None
        self._first_launch = asyncio.Lock()
        self._trust_lock = threading.Lock()
        if ca_bundle is not None and certutil() is None:
            raise BrowserMissing(
                "RESEARCH_CA_BUNDLE needs certutil (libnss3-tools) for the browser to trust it"
            )

    async def narrow_cpu(self, launched: Launched, seconds: float) -> None:
        """Lower the CPU limit of a browser launched ahead (for the longest render) to this render's:
        each process of its tree now, and so every renderer its zygote forks for the page."""
        pid = _browser_pid(launched.pid_file)
        if pid is None:
            return
        cpu_s = cpu_seconds(seconds)
        members = tree_of(pid)
        try:
            for member in members:
                with contextlib.suppress(ProcessLookupError):
                    resource.prlimit(member, resource.RLIMIT_CPU, (cpu_s, cpu_s))
            return
        except PermissionError:
            if not self._drop:
                raise
        # Root without CAP_SYS_RESOURCE (a container's default) may not change another user's
        # limits; the browser's own user may.
        assert self._prlimit is not None and self._setpriv is not None
        script = f'for p; do {shlex.quote(self._prlimit)} --cpu={cpu_s}:{cpu_s} --pid "$p"; done'
        process = await asyncio.create_subprocess_exec(
            self._setpriv,
            f"--reuid={UNPRIVILEGED_UID}",
            f"--regid={UNPRIVILEGED_GID}",
            "--clear-groups",
            "--",
            "/bin/sh",
            "-c",
            script,
            "sh",
            *map(str, members),
            env={"PATH": BROWSER_PATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await process.wait()

    def close(self) -> None:
        """Remove the trust store built for the renders (the worker is stopping)."""
        if self._trust_store is not None:
            shutil.rmtree(self._trust_store, ignore_errors=True)
            self._trust_store = None

    @contextlib.asynccontextmanager
    async def launch(
        self, playwright: Playwright, proxy: str, limits: Limits, watch: Watch
    ) -> AsyncIterator[BrowserContext]:
        """A fresh browser and profile, proxied through ``proxy``; killed (whole tree) on exit."""
        launched = await self.open(playwright, proxy, limits)
        watcher = watch_memory(launched, limits.memory_bytes, watch)
        try:
            yield launched.context
        finally:
            kill_tree(launched.pid_file)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await discard(launched)

    async def open(self, playwright: Playwright, proxy: str, limits: Limits) -> Launched:
        """A fresh browser and profile, proxied through ``proxy``: the caller ends it with ``discard``.
        Nothing is left behind when the launch fails or is cancelled."""
        home = Path(tempfile.mkdtemp(prefix="research-render-"))
        pid_file = home / "browser.pid"
        try:
            # Not cancelled halfway: the folder is complete (or failed) before anything removes it.
            preparing = asyncio.ensure_future(asyncio.to_thread(self._prepare, home, limits))
            try:
                await asyncio.shield(preparing)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await preparing
                raise
            context = await self._start(playwright, proxy, limits, home)
        except BaseException:
            kill_tree(pid_file)
            shutil.rmtree(home, ignore_errors=True)
            raise
        return Launched(context, home, time.monotonic())

    async def _start(self, playwright: Playwright, proxy: str, limits: Limits, home: Path) -> BrowserContext:
        profile, pid_file, launcher = home / "profile", home / "browser.pid", home / "chromium"
        env: dict[str, str | float | bool] = {
            "HOME": str(profile),
            "XDG_CONFIG_HOME": str(profile / ".config"),
            "XDG_CACHE_HOME": str(profile / ".cache"),
            "TMPDIR": str(profile),
            "PATH": BROWSER_PATH,
            "LANG": "C.UTF-8",
        }
        heap_mb = max(64, limits.memory_bytes // (4 * 1024 * 1024))
        options: dict[str, Any] = {
            "executable_path": str(launcher),
            "headless": True,
            "args": [
                f"--proxy-server={proxy}",
                "--proxy-bypass-list=<-loopback>",
                f"--js-flags=--max-old-space-size={heap_mb}",
                *FLAGS,
            ],
            "ignore_default_args": IGNORED_DEFAULTS,
            "env": env,
            "handle_sigint": False,
            "handle_sigterm": False,
            "handle_sighup": False,
            "service_workers": "block",
            "accept_downloads": False,
            "java_script_enabled": True,
            "timeout": max(1000.0, limits.seconds * 1000),
        }
        if self.sandboxed is None:
            # The first launch finds out about the sandbox; launches beside it wait for the answer.
            async with self._first_launch:
                if self.sandboxed is None:
                    return await self._first(playwright, profile, pid_file, options)
        return await playwright.chromium.launch_persistent_context(
            str(profile), chromium_sandbox=self.sandboxed is not False, **options
        )

    async def _first(
        self, playwright: Playwright, profile: Path, pid_file: Path, options: dict[str, Any]
    ) -> BrowserContext:
        try:
            context = await playwright.chromium.launch_persistent_context(
                str(profile), chromium_sandbox=True, **options
            )
            self.sandboxed = True
        except Exception:
            # The first launch tells whether Chromium's own sandbox can start here (it needs
            # user namespaces, which many containers do not grant); without it, the
            # unprivileged user, the limits and the proxy are the containment.
            self.sandboxed = False
            log.warning("chromium's sandbox cannot start here: renders run without it")
            kill_tree(pid_file)
            context = await playwright.chromium.launch_persistent_context(
                str(profile), chromium_sandbox=False, **options
            )
        return context

    def _prepare(self, home: Path, limits: Limits) -> None:
        """The render's private folder: the profile (with the operator's CA), the launcher."""
        home.chmod(0o711)  # the unprivileged browser must reach its profile inside
        profile = home / "profile"
        profile.mkdir()
        launcher = home / "chromium"
        launcher.write_text(self._script(home / "browser.pid", limits))
        launcher.chmod(0o700)
        if self._ca_bundle is not None:
            with self._trust_lock:  # launches ahead prepare in threads side by side
                if self._trust_store is None:
                    store = Path(tempfile.mkdtemp(prefix="research-render-trust-"))
                    _trust(store, self._ca_bundle)
                    self._trust_store = store  # only once complete: no launch copies half a store
            # A copy of the one store built at the first render: certutil costs a few hundred ms.
            shutil.copytree(self._trust_store / ".pki", profile / ".pki")
        if self._drop:
            _give(profile, UNPRIVILEGED_UID, UNPRIVILEGED_GID)

    def _script(self, pid_file: Path, limits: Limits) -> str:
        cpu_s = cpu_seconds(limits.seconds)
        assert self._prlimit is not None and self._setpriv is not None
        limit = f"{shlex.quote(self._prlimit)} --cpu={cpu_s} --nofile={MAX_OPEN_FILES} --core=0 --"
        setpriv = shlex.quote(self._setpriv)
        drop = (
            f"{setpriv} --reuid={UNPRIVILEGED_UID} --regid={UNPRIVILEGED_GID} --clear-groups "
            "--inh-caps=-all --bounding-set=-all --no-new-privs --"
            if self._drop
            else f"{setpriv} --no-new-privs --"
        )
        return (
            "#!/bin/sh\n"
            f"echo $$ > {shlex.quote(str(pid_file))}\n"
            f'exec {limit} {drop} {shlex.quote(self._chromium)} "$@"\n'
        )


def _trust(profile: Path, ca_bundle: str) -> None:
    """The operator's extra CA (RESEARCH_CA_BUNDLE) in the profile's own NSS store, as fetches trust it."""
    store = profile / ".pki" / "nssdb"
    store.mkdir(parents=True)
    tool = certutil()
    assert tool is not None
    run = {"check": True, "capture_output": True, "timeout": 10}
    subprocess.run([tool, "-N", "-d", f"sql:{store}", "--empty-password"], **run)  # type: ignore[call-overload]  # noqa: S603
    subprocess.run(  # type: ignore[call-overload]  # noqa: S603
        [tool, "-A", "-d", f"sql:{store}", "-n", "research-ca-bundle", "-t", "C,,", "-i", ca_bundle], **run
    )


def _give(root: Path, uid: int, gid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)


def _browser_pid(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 1 else None


def tree_of(pid: int) -> list[int]:
    """The processes of the browser's process group, and any descendant that left it."""
    parents: dict[int, int] = {}
    groups: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        parents[int(entry)] = int(fields[1])
        groups[int(entry)] = int(fields[2])
    members = {p for p, group in groups.items() if group == pid}
    if pid in parents:
        members.add(pid)
    grew = True
    while grew:
        more = {p for p, parent in parents.items() if parent in members and p not in members}
        members |= more
        grew = bool(more)
    return sorted(members)


def resident_bytes(pids: list[int]) -> int:
    """The tree's proportional set size: shared pages (the browser's own code, mapped by every
    process of it) are counted once across the tree, not once per process as RSS would."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError, IndexError):
            continue
    return total


def kill_tree(pid_file: Path) -> None:
    """SIGKILL the browser's whole tree: its group, then anything of it that escaped the group."""
    pid = _browser_pid(pid_file)
    if pid is None:
        return
    members = tree_of(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for member in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


async def discard(launched: Launched) -> None:
    """Kill the whole tree, let Playwright reap it, remove the profile: nothing of it is kept."""
    kill_tree(launched.pid_file)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(launched.context.close(), 2.0)
    kill_tree(launched.pid_file)
    await asyncio.to_thread(shutil.rmtree, launched.home, True)


def watch_memory(launched: Launched, memory_bytes: int, watch: Watch) -> asyncio.Task[None]:
    """The watchdog over the browser's tree; the caller cancels it when the render ends."""
    return asyncio.get_running_loop().create_task(_watch(launched.pid_file, memory_bytes, watch))


def _tree_resident_bytes(pid: int) -> int:
    return resident_bytes(tree_of(pid))


async def _watch(pid_file: Path, memory_bytes: int, watch: Watch) -> None:
    while True:
        await asyncio.sleep(WATCH_INTERVAL_S)
        pid = _browser_pid(pid_file)
        if pid is None:
            continue
        watch.pid = pid
        used = await asyncio.to_thread(_tree_resident_bytes, pid)
        watch.peak_bytes = max(watch.peak_bytes, used)
        if used > memory_bytes:
            watch.killed_for_memory = True
            kill_tree(pid_file)
            return
