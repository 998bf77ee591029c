"""The local Neo4j: one JVM running one embedded Neo4j 5.26 Community DBMS per world.

``serve()`` builds the small Java launcher in ``graphs/jvm`` with Maven (jars come from Maven Central
and stay cached in ~/.m2), writes one hardened ``neo4j.conf`` per world, starts the JVM detached and
waits until every world's Bolt port answers. It is idempotent: a running server that serves every
world is reused. State lives under the cache directory (``$CYPHERTURN_HOME``, default
``~/.cache/cypherturn``): ``neo4j/server.json`` (pid and ports), ``neo4j/server.log`` (the JVM's
output), ``neo4j/<world>/`` (each DBMS home with its store, config and Neo4j's own logs).

Starting is serialized by a file lock (concurrent callers reuse one server) and a server started after
a crash takes the ports of the one before, so clients find it where they left it. Inside the JVM a
watchdog (``graphs/jvm/.../Watchdog.java``) ends any transaction still running ``WATCHDOG_GRACE_S``
past its timeout, or holding the heap, by termination, then by closing its connection and stopping its
thread (never while it sends a result or frees memory, where a stop can take the JVM down), and as a last
resort by halting (code 75), after which the next ``serve`` (or ``connections.resolve``, which finds the
port closed) restarts it; each action is a ``WATCHDOG`` line in ``server.log``. Before a halt it writes
``neo4j/halted.json`` (``halt_record()``: the world and text of the query it halted for, and whether for
time or memory), by which the executor reports that query's error instead of retrying it. The JVM does
not exit on ``OutOfMemoryError`` (one allocation too large for the heap fails in the query that asked for it), and
Bolt's buffers, so result records, are capped at ``BOLT_MAX_BUFFER_BYTES`` (``CappedAllocator``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from cypherturn.errors import InfrastructureError

NEO4J_VERSION = "5.26.24"  # keep equal to graphs/jvm/pom.xml
DEFAULT_BASE_PORT = 17687
MAIN_CLASS = "cypherturn.EmbeddedServer"
WATCHDOG_GRACE_S = 5.0  # a transaction this long past its timeout is ended by the JVM's watchdog
WATCHDOG_INTERVAL_S = 0.2  # how often it looks
# False: it never stops a thread and halts the JVM where it would have (what Java 20+ forces: it cannot stop
# threads); tests/test_server_halt_attribution.py reaches the halt path this way on a private server
WATCHDOG_STOPS_THREADS = True
# A killed JVM counts as gone once its memory is released, but its listening sockets close after that, one
# by one: a restart waits this long for the previous ports before it moves the worlds to other ones.
PORT_RELEASE_WAIT_S = 15.0
# The largest buffer Bolt may use, so the largest result record the server will build: writing past it fails
# that query at once (graphs/jvm CappedAllocator) instead of serializing gigabytes no client would take.
# The executor caps one value at 1 MiB by default, 16 MiB for the judge's provenance lists (approximate JSON
# sizes; packstream is no larger for them). Every record the server sends, the driver decodes whole on the
# caller's thread, where no deadline reaches: under a 128 MiB cap a 50 MB list held a 2 s query for 21 s.
BOLT_MAX_BUFFER_BYTES = 32 << 20


class ServerError(InfrastructureError):
    """The local Neo4j could not be built, started or stopped; the message says why."""


def cache_home() -> Path:
    return Path(os.environ.get("CYPHERTURN_HOME", Path.home() / ".cache" / "cypherturn")).expanduser()


def neo4j_dir() -> Path:
    return cache_home() / "neo4j"


def _state_path() -> Path:
    return neo4j_dir() / "server.json"


def log_path() -> Path:
    return neo4j_dir() / "server.log"


def halt_record_path() -> Path:
    return neo4j_dir() / "halted.json"


@dataclass(frozen=True)
class HaltRecord:
    """The query the JVM's watchdog halted the server for (written just before the halt)."""
    world: str
    query: str
    kind: str  # "timeout" or "memory": the query's own error kind
    reason: str
    time: float  # seconds since the epoch
    pid: int


def halt_record() -> HaltRecord | None:
    """The latest halt record of the local server, or None."""
    try:
        raw = json.loads(halt_record_path().read_text(encoding="utf-8"))
        return HaltRecord(world=str(raw["world"]), query=str(raw["query"]), kind=str(raw["kind"]),
                          reason=str(raw["reason"]), time=float(raw["time_ms"]) / 1000.0, pid=int(raw["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class ServerState:
    pid: int
    ports: dict[str, int]
    started_at: float
    neo4j_version: str

    def uri(self, world: str) -> str:
        return f"bolt://127.0.0.1:{self.ports[world]}"


def _settings(port: int, import_dir: Path) -> dict[str, str]:
    """Hardened per-world settings: loopback only, no file access, bounded memory and time. No plugins:
    nothing is ever put in a world's ``plugins`` directory; only a test's private server gets the test-only
    functions of ``tests/jvm`` there, since any query could call them to hold a thread as long as it likes."""
    return {
        "server.bolt.enabled": "true",
        "server.bolt.listen_address": f"127.0.0.1:{port}",
        "server.bolt.advertised_address": f"127.0.0.1:{port}",
        # loopback only and no other listener; the worlds hold synthetic data
        "dbms.security.auth_enabled": "false",
        "server.memory.pagecache.size": "24m",
        # upper bound for any transaction; clients ask for much less per query
        "db.transaction.timeout": "300s",
        "db.lock.acquisition.timeout": "30s",
        "db.memory.transaction.max": "256m",
        "dbms.memory.transaction.total.max": "1g",
        "dbms.security.allow_csv_import_from_file_urls": "false",
        # LOAD CSV may fetch no URL at all: every IPv4 and IPv6 address is blocked
        "internal.dbms.cypher_ip_blocklist": "0.0.0.0/0,::/0",
        "server.directories.import": str(import_dir),
        "dbms.security.procedures.unrestricted": "",
        "db.tx_log.rotation.retention_policy": "2 files",
    }


def _source_dir() -> Path:
    return Path(str(resources.files("graphs") / "jvm"))


def _source_hash(src: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in src.rglob("*") if p.is_file() and "target" not in p.parts):
        h.update(str(path.relative_to(src)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ServerError(f"'{name}' was not found on PATH; {hint}")
    return path


def java_version() -> int:
    java = _require_tool("java", "the local Neo4j needs Java 17 or newer")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    for token in out.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and token[0].isdigit():
            major = int(head)
            return 8 if major == 1 else major
    raise ServerError(f"could not read the Java version from: {out.strip()}")


def maven_build(src: Path, product: str, what: str, progress=print) -> Path:
    """Build the Maven project ``src`` (``mvn package``) once per source version, in a copy under the cache
    directory; return that build directory, which holds ``product`` (a path relative to it)."""
    mvn = _require_tool("mvn", "the local Neo4j's jars are resolved with Maven (install maven)")
    build = cache_home() / "jvm" / _source_hash(src)
    if not (build / product).is_file():
        progress(f"building {what} with Maven (first run downloads the jars)...")
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(src, build, ignore=shutil.ignore_patterns("target"))
        proc = subprocess.run([mvn, "-B", "-q", "package", "-DskipTests"], cwd=build,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not (build / product).is_file():
            shutil.rmtree(build / "target", ignore_errors=True)
            raise ServerError(f"Maven failed to build {what}:\n" + (proc.stdout + proc.stderr)[-4000:])
    return build


def build_launcher(progress=print) -> list[str]:
    """Build graphs/jvm with Maven once per source version; return the java classpath entries."""
    if java_version() < 17:
        raise ServerError("the local Neo4j 5.26 needs Java 17 or newer")
    build = maven_build(_source_dir(), "target/classpath.txt", f"the Neo4j {NEO4J_VERSION} launcher", progress)
    classpath = (build / "target" / "classpath.txt").read_text().strip().split(os.pathsep)
    return [str(build / "target" / "classes")] + classpath


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as Neo4j binds: connections of a killed server lingering in TIME_WAIT do not block the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # a recycled pid belongs to some other program
        return MAIN_CLASS.encode() in cmdline.read_bytes()
    return True


def read_state() -> ServerState | None:
    try:
        raw = json.loads(_state_path().read_text())
        return ServerState(pid=int(raw["pid"]), ports={k: int(v) for k, v in raw["ports"].items()},
                           started_at=float(raw["started_at"]), neo4j_version=raw["neo4j_version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_state() -> ServerState | None:
    """The state of a live local server (process alive), or None."""
    state = read_state()
    if state is None or not _pid_alive(state.pid):
        return None
    return state


def _allocate_ports(worlds: list[str], previous: dict[str, int] | None = None, *,
                    wait: float = PORT_RELEASE_WAIT_S) -> dict[str, int]:
    """Consecutive free ports from the base port; every world keeps its previous port when those are free
    within ``wait`` seconds (a restarted server comes back where its clients look for it)."""
    base = int(os.environ.get("CYPHERTURN_NEO4J_BASE_PORT", DEFAULT_BASE_PORT))
    previous = previous or {}
    if all(w in previous for w in worlds):
        deadline = time.monotonic() + wait
        while True:
            if all(_port_free(previous[w]) for w in worlds):
                return {w: previous[w] for w in worlds}
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    ports: dict[str, int] = {}
    port = base
    for world in worlds:
        while not _port_free(port):
            port += 1
            if port > base + 1000:
                raise ServerError(f"no free port found in {base}..{base + 1000} for the local Neo4j")
        ports[world] = port
        port += 1
    return ports


def serve(worlds: list[str] | None = None, *, timeout: float = 300.0, progress=print) -> ServerState:
    """Start the local server for ``worlds`` (default: every shipped world), or reuse a running one."""
    if worlds is None:
        from graphs.spec import all_specs
        worlds = [s.world for s in all_specs()]
    import fcntl

    neo4j_dir().mkdir(parents=True, exist_ok=True)
    with open(neo4j_dir() / "serve.lock", "w") as lock:
        # one starter at a time (e.g. the evaluator's threads after an outage); the others reuse its server
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _serve_locked(worlds, timeout=timeout, progress=progress)


def _serve_locked(worlds: list[str], *, timeout: float, progress) -> ServerState:
    previous = read_state()
    state = running_state()
    if state is not None:
        if set(worlds) <= set(state.ports) and all(port_open(p) for p in state.ports.values()):
            return state
        missing = not set(worlds) <= set(state.ports)
        progress("the running local Neo4j " + ("does not serve every world" if missing
                                               else "does not answer on every world's port") + "; restarting it")
        stop(timeout=20.0, progress=progress)  # one not answering may hang in its shutdown: killed after 20 s
    classpath = build_launcher(progress=progress)
    home = neo4j_dir()
    home.mkdir(parents=True, exist_ok=True)
    import_dir = home / "import-empty"
    import_dir.mkdir(exist_ok=True)
    ready = home / "ready"
    ready.unlink(missing_ok=True)
    ports = _allocate_ports(worlds, previous.ports if previous is not None else None)
    lines = [f"worlds={','.join(worlds)}", f"ready_file={ready}", f"watchdog.grace_ms={int(WATCHDOG_GRACE_S * 1000)}",
             f"watchdog.interval_ms={int(WATCHDOG_INTERVAL_S * 1000)}",
             f"watchdog.stop_threads={str(WATCHDOG_STOPS_THREADS).lower()}", f"halt_record={halt_record_path()}",
             f"bolt.max_buffer_bytes={BOLT_MAX_BUFFER_BYTES}"]
    for world, port in ports.items():
        world_home = home / world
        world_home.mkdir(exist_ok=True)
        conf = "".join(f"{k}={v}\n" for k, v in _settings(port, import_dir).items())
        (world_home / "neo4j.conf").write_text(conf)
        lines.append(f"world.{world}.home={world_home}")
    props = home / "server.properties"
    props.write_text("\n".join(lines) + "\n")
    heap = os.environ.get("CYPHERTURN_NEO4J_HEAP", "3g")
    cmd = ["java", f"-Xmx{heap}", "-cp", os.pathsep.join(classpath),
           MAIN_CLASS, str(props)]
    progress(f"starting the local Neo4j {NEO4J_VERSION} ({len(worlds)} worlds, log: {log_path()})...")
    t0 = time.monotonic()
    with open(log_path(), "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    state = ServerState(pid=proc.pid, ports=ports, started_at=time.time(), neo4j_version=NEO4J_VERSION)
    _state_path().write_text(json.dumps(state.__dict__, indent=1))
    while not ready.exists():
        if proc.poll() is not None:
            _state_path().unlink(missing_ok=True)
            raise ServerError(f"the local Neo4j exited with code {proc.returncode} during start-up; "
                              f"last lines of {log_path()}:\n{_log_tail()}")
        if time.monotonic() - t0 > timeout:
            stop(progress=lambda *_: None)
            raise ServerError(f"the local Neo4j did not become ready within {timeout:.0f} s; "
                              f"last lines of {log_path()}:\n{_log_tail()}")
        time.sleep(0.2)
    progress(f"local Neo4j ready in {time.monotonic() - t0:.1f} s")
    return state


def _log_tail(lines: int = 30) -> str:
    try:
        return "\n".join(log_path().read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(*, timeout: float = 60.0, progress=print) -> bool:
    """Stop the local server if one runs. Returns whether a server was stopped."""
    state = running_state()
    stopped = False
    if state is not None:
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid_alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_alive(state.pid):
            progress("the local Neo4j did not stop in time; killing it")
            os.kill(state.pid, signal.SIGKILL)
        _reap(state.pid)
        stopped = True
        progress("local Neo4j stopped")
    _state_path().unlink(missing_ok=True)
    (neo4j_dir() / "ready").unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    """Collect the exit status when the JVM is our own child (serve and stop in one process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass

