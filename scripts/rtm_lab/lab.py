"""Bring the whole lab up or down, report on it, and export its settings. The CLI is `scripts/lab.py`.

A service named by the user's environment (KAFKA_BOOTSTRAP_SERVERS, POSTGRES_DSN) is used as it is: the lab checks
that it answers and starts nothing for it, and never writes its address (it may hold a password) to disk.

`up` and `down` hold one lock (a file in the lab folder), so two of them at once take turns: the second finds what
the first started. A process the lab started is recorded the moment it exists, with its start time, and is signalled
only after checking it is still that process. A service that runs but answers slowly is reported, never stopped.
"""

import contextlib
import fcntl
import json
import os
import shlex
import shutil
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from rtm_lab import kafka, ports, postgres, processes, s3_proxy, s3store
from rtm_lab.errors import LabError, redact
from rtm_lab.monitoring import prometheus
from rtm_lab.paths import make_private_dir, state_dir, write_private
from rtm_lab.waiting import WaitTimeout, wait_until

KAFKA_ENV = "KAFKA_BOOTSTRAP_SERVERS"
POSTGRES_ENV = "POSTGRES_DSN"
KAFKA_PORT_ENV = "RTM_LAB_KAFKA_PORT"
POSTGRES_PORT_ENV = "RTM_LAB_POSTGRES_PORT"
PROMETHEUS_PORT_ENV = "RTM_LAB_PROMETHEUS_PORT"
# Set by `lab.py env` when the lab's Prometheus runs (started only on request: `lab.py up --with prometheus`).
PROMETHEUS_URL_ENV = "PROMETHEUS_URL"
S3_PORT_ENV = "RTM_LAB_S3_PORT"
# Set by `lab.py env` when the lab's object store runs (`lab.py up --with s3`): its endpoint, and the file holding its
# keys (the keys themselves are never printed).
S3_ENDPOINT_ENV = "RTM_S3_ENDPOINT"
S3_CREDENTIALS_ENV = "RTM_S3_CREDENTIALS_FILE"
OPTIONAL_SERVICES = ("prometheus", "s3")
WAIT_ENV = "RTM_LAB_WAIT_S"
# How long `up` waits for a service that runs but does not answer yet (a loaded machine) before saying so.
SLOW_SERVICE_WAIT_S = 60.0


@dataclass
class Service:
    name: str
    address: str = ""
    pid: int | None = None
    port: int | None = None
    extra_port: int | None = None
    external: bool = False
    running: bool = False
    detail: str = ""
    started: str = ""  # the process's start-time token (processes.start_time), to tell it from a reused pid


@dataclass
class LabState:
    kafka: Service = field(default_factory=lambda: Service("kafka"))
    postgres: Service = field(default_factory=lambda: Service("postgres"))
    prometheus: Service = field(default_factory=lambda: Service("prometheus"))
    s3: Service = field(default_factory=lambda: Service("s3"))
    # The delay proxy in front of the store (rtm_lab.s3_proxy): started and stopped with it.
    s3_proxy: Service = field(default_factory=lambda: Service("s3-proxy"))

    @property
    def kafka_bootstrap(self) -> str:
        return self.kafka.address

    @property
    def postgres_dsn(self) -> str:
        return self.postgres.address


def make_lab_dir() -> Path:
    """The lab folder: private, except that as root it can be crossed (not listed) so the `postgres` user reaches
    its own 0700 folder inside; everything in it is 0700/0600."""
    if state_dir().is_dir():
        return state_dir()  # its mode is the user's choice by now
    made = make_private_dir(state_dir())
    if os.geteuid() == 0:
        made.chmod(0o711)
    return made


def _state_file() -> Path:
    return state_dir() / "state.json"


def _service(raw: dict) -> Service:
    known = {f.name for f in fields(Service)}
    return Service(**{k: v for k, v in raw.items() if k in known})


def _load() -> LabState:
    try:
        raw = json.loads(_state_file().read_text())
        state = LabState(kafka=_service(raw["kafka"]), postgres=_service(raw["postgres"]))
        if "prometheus" in raw:  # state files written before the lab had a Prometheus have no entry
            state.prometheus = _service(raw["prometheus"])
        if "s3" in raw:
            state.s3 = _service(raw["s3"])
        if "s3-proxy" in raw:
            state.s3_proxy = _service(raw["s3-proxy"])
        return state
    except (OSError, ValueError, KeyError, TypeError):
        return LabState()


def recorded() -> LabState:
    """What the lab's state file says runs, without asking anything (`status()` checks each service)."""
    return _load()


def _save(state: LabState) -> None:
    saved = {}
    for service in (state.kafka, state.postgres, state.prometheus, state.s3, state.s3_proxy):
        # An external service's address comes from the environment each time; it may carry a password.
        saved[service.name] = asdict(Service(service.name, external=True) if service.external else service)
    make_lab_dir()
    write_private(_state_file(), json.dumps(saved, indent=2, sort_keys=True))


_lock_depth = 0


@contextlib.contextmanager
def _locked(log) -> Iterator[None]:
    """Hold the lab's lock (re-entrant within this process: `up` calls `down` when a start fails)."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    make_lab_dir()
    fd = os.open(state_dir() / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("lab       another `lab.py up/down` is at work on this lab folder; waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        _lock_depth = 1
        try:
            yield
        finally:
            _lock_depth = 0
    finally:
        os.close(fd)  # closing releases the lock


def _env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 86400:
        raise LabError(f"{name}={value!r} is not a number of seconds (above 0). Fix it or unset it.")
    return seconds


def _env_port(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise LabError(f"{name}={value!r} is not a port number (1-65535). Fix it or unset it.")
    return int(value)


def _kafka_root() -> Path:
    return state_dir() / "kafka"


def _lab_process(previous: Service, marker: str) -> tuple[int | None, str]:
    """The process of a service this lab folder runs (its command line holds `marker`), as (pid, start token), or
    (None, ""): the recorded one if it is still that process, else one found by its command line (a state file that
    lost it must not hide a running server)."""
    if processes.is_ours(previous.pid, previous.started, marker):
        return previous.pid, previous.started
    found = processes.find(marker)
    return (found[0], processes.start_time(found[0])) if found else (None, "")


def _stop_lab_process(recorded: Service, marker: str, what: str | None, log) -> None:
    """Stop every process of the service this lab folder runs: the recorded one if it is still ours, and any found
    by `marker`. A recorded pid that is now another process is named (as the lab's `what`) and left alone."""
    alive_other = processes.is_alive(recorded.pid) and not processes.is_ours(recorded.pid, recorded.started, marker)
    if what and alive_other:
        log(f"{recorded.name:<9} pid {recorded.pid} in the state file is no longer this lab's {what}; left alone")
    for pid in {p for p in [_lab_process(recorded, marker)[0], *processes.find(marker)] if p}:
        log(f"{recorded.name:<9} stopping (pid {pid})")
        processes.stop(pid, marker=marker)


def _wait_for_slow(what: str, pid: int, check, log_file: Path, log) -> None:
    """A live service of ours that does not answer yet: wait, then report it; never stop it (someone may use it)."""
    if check():
        return
    patience = _env_seconds(WAIT_ENV, SLOW_SERVICE_WAIT_S)
    log(f"{what:<9} running (pid {pid}) but not answering yet; waiting up to {patience:g}s")
    try:
        wait_until(check, patience, what, interval_s=1.0)
    except WaitTimeout:
        raise LabError(
            f"{what} (pid {pid}, started by this lab) runs but has not answered for {patience:g}s; it "
            f"may be overloaded. It was left running. See {log_file}; `python scripts/lab.py down` stops it."
        ) from None


def _check_external_services() -> dict[str, Service]:
    """The services named by the environment, each checked to answer (in seconds, not minutes)."""
    found = {}
    external = os.environ.get(KAFKA_ENV)
    if external:
        if not kafka.answers(external):
            raise LabError(
                f"{KAFKA_ENV}={external} does not answer a Kafka metadata request. Start that broker, fix the "
                f"address, or unset {KAFKA_ENV} to let the lab run its own."
            )
        found["kafka"] = Service("kafka", address=external, external=True, running=True, detail="external")
    external = os.environ.get(POSTGRES_ENV)
    if external:
        reason = postgres.problem(external)
        if reason:
            raise LabError(
                f"{POSTGRES_ENV} ({redact(external)}) does not answer SELECT 1: {reason}. Start that server, fix the "
                f"DSN, or unset {POSTGRES_ENV} to let the lab run its own."
            )
        found["postgres"] = Service("postgres", address=external, external=True, running=True, detail="external")
    return found


def _kafka_up(state: LabState, log, spawned: set[str]) -> None:
    previous = state.kafka
    pid, started = _lab_process(previous, kafka.marker(_kafka_root()))
    if pid is not None:
        port = kafka.configured_port(_kafka_root()) or previous.port
        address = f"{ports.HOST}:{port}"
        _wait_for_slow("kafka", pid, lambda: kafka.answers(address), kafka.KafkaPaths(_kafka_root()).server_log, log)
        state.kafka = Service("kafka", address, pid, port, previous.extra_port, running=True, started=started)
        log(f"kafka     already running at {address} (pid {pid})")
        return
    port = ports.choose(_env_port(KAFKA_PORT_ENV), KAFKA_PORT_ENV, previous.port)
    controller_port = ports.choose(None, "", previous.extra_port, avoid={port})
    log(f"kafka     starting a KRaft broker on {ports.HOST}:{port} ...")
    address = f"{ports.HOST}:{port}"

    def record(new_pid: int) -> None:
        spawned.add("kafka")
        state.kafka = Service("kafka", address, new_pid, port, controller_port, started=processes.start_time(new_pid))
        _save(state)

    kafka.start(_kafka_root(), port, controller_port, on_spawn=record)
    state.kafka.running = True
    _save(state)
    log(f"kafka     ready at {address} (pid {state.kafka.pid}); log {kafka.KafkaPaths(_kafka_root()).server_log}")


def _postgres_up(state: LabState, log, spawned: set[str]) -> None:
    previous = state.postgres
    pid = postgres.server_pid(state_dir())
    if pid is not None:
        port = postgres.server_port(state_dir()) or previous.port
        if port is None:
            raise LabError(
                f"PostgreSQL runs (pid {pid}) but its port is unknown (no postmaster.pid port, none recorded): stop it "
                "with `python scripts/lab.py down`, then run `up` again."
            )
        address = postgres.dsn(port)
        _wait_for_slow("postgres", pid, lambda: postgres.answers(address), postgres.log_path(state_dir()), log)
        state.postgres = Service("postgres", address, pid, port, running=True, started=processes.start_time(pid))
        log(f"postgres  already running at {redact(address)} (pid {pid})")
        return
    port = ports.choose(_env_port(POSTGRES_PORT_ENV), POSTGRES_PORT_ENV, previous.port)
    log(f"postgres  starting a private cluster on {ports.HOST}:{port} as {postgres.whoami()} ...")

    def record(new_pid: int) -> None:
        spawned.add("postgres")
        state.postgres = Service("postgres", postgres.dsn(port), new_pid, port, started=processes.start_time(new_pid))
        _save(state)

    postgres.start(state_dir(), port, on_spawn=record)
    state.postgres.running = True
    _save(state)
    log(
        f"postgres  ready at {redact(state.postgres.address)} (pid {state.postgres.pid}); "
        f"log {postgres.log_path(state_dir())}"
    )


def _adopt(name: str, pid: int, started: str, port: int | None, answers, address_of, log_file: Path, log) -> Service:
    """A server of ours already running (prometheus, s3): waited for if it does not answer yet, then recorded."""
    if port is None:
        raise LabError(
            f"{name} (pid {pid}) runs but its port is not recorded: stop it (lab.py down) and start it again"
        )
    _wait_for_slow(name, pid, lambda: answers(port), log_file, log)
    log(f"{name:<9} already running at {address_of(port)} (pid {pid})")
    return Service(name, address_of(port), pid, port, running=True, started=started)


def _prometheus_up(state: LabState, log, spawned: set[str]) -> None:
    previous = state.prometheus
    pid, started = _lab_process(previous, prometheus.marker())
    if pid is not None:
        port = prometheus.configured_port() or previous.port
        state.prometheus = _adopt(
            "prometheus", pid, started, port, prometheus.answers, prometheus.url, prometheus.log_path(), log
        )
        return
    port = ports.choose(_env_port(PROMETHEUS_PORT_ENV), PROMETHEUS_PORT_ENV, previous.port)
    log(f"prometheus starting on {ports.HOST}:{port} ...")
    address = prometheus.url(port)

    def record(new_pid: int) -> None:
        spawned.add("prometheus")
        state.prometheus = Service("prometheus", address, new_pid, port, started=processes.start_time(new_pid))
        _save(state)

    prometheus.start(port, on_spawn=record)
    state.prometheus.running = True
    _save(state)
    log(f"prometheus ready at {address} (pid {state.prometheus.pid}); log {prometheus.log_path()}")


def _s3_up(state: LabState, log, spawned: set[str]) -> None:
    previous = state.s3
    pid, started = _lab_process(previous, s3store.marker())
    if pid is not None:
        port = s3store.configured_port() or previous.port
        state.s3 = _adopt("s3", pid, started, port, s3store.answers, s3store.endpoint, s3store.log_path(), log)
        return
    port = ports.choose(_env_port(S3_PORT_ENV), S3_PORT_ENV, previous.port)
    address = s3store.endpoint(port)

    def record(new_pid: int) -> None:
        spawned.add("s3")
        state.s3 = Service("s3", address, new_pid, port, started=processes.start_time(new_pid))
        _save(state)

    s3store.binary(log)  # built (once) before the start-up message, so the build's progress reads in order
    log(f"s3        starting versitygw on {ports.HOST}:{port} ...")
    s3store.start(port, on_spawn=record, log=log)
    state.s3.running = True
    _save(state)
    log(f"s3        ready at {address} (pid {state.s3.pid}), bucket {s3store.BUCKET}; log {s3store.log_path()}")


def _s3_proxy_up(state: LabState, log, spawned: set[str]) -> None:
    """The delay proxy in front of the running store, at no delay until a benchmark sets one."""
    previous = state.s3_proxy
    pid, started = _lab_process(previous, s3_proxy.marker())
    if pid is not None:
        port = s3_proxy.configured_port() or previous.port
        state.s3_proxy = Service("s3-proxy", s3store.endpoint(port or 0), pid, port, running=True, started=started)
        log(f"s3-proxy  already running at {state.s3_proxy.address} (pid {pid})")
        return
    assert state.s3.port is not None  # started just before
    port = ports.choose(None, "", previous.port, avoid={state.s3.port})
    address = s3store.endpoint(port)

    def record(new_pid: int) -> None:
        spawned.add("s3-proxy")
        state.s3_proxy = Service("s3-proxy", address, new_pid, port, started=processes.start_time(new_pid))
        _save(state)

    s3_proxy.start(port, state.s3.port, on_spawn=record)
    state.s3_proxy.running = True
    _save(state)
    log(
        f"s3-proxy  delay proxy ready at {address} (pid {state.s3_proxy.pid}); requests logged to {s3_proxy.log_path()}"
    )


def up(log=print, with_services: Collection[str] = frozenset()) -> tuple[LabState, set[str]]:
    """Start what is not running; return the state and the names of services this call started.

    If a service fails to start (or the call is interrupted), whatever this call started is stopped again, so a
    failed `up` leaves the lab as it found it rather than half-started. `with_services` names optional services to
    start too (OPTIONAL_SERVICES: "prometheus", "s3").
    """
    unknown = set(with_services) - set(OPTIONAL_SERVICES)
    if unknown:
        raise LabError(
            f"unknown optional service(s) {', '.join(sorted(unknown))}; known: {', '.join(OPTIONAL_SERVICES)}"
        )
    # Bad settings and unreachable external services are reported before anything is created or started.
    _env_port(KAFKA_PORT_ENV), _env_port(POSTGRES_PORT_ENV), _env_port(PROMETHEUS_PORT_ENV), _env_port(S3_PORT_ENV)
    _env_seconds(WAIT_ENV, SLOW_SERVICE_WAIT_S)
    externals = _check_external_services()
    spawned: set[str] = set()
    with _locked(log):
        state = _load()
        state.kafka = externals.get("kafka", state.kafka)
        state.postgres = externals.get("postgres", state.postgres)
        try:
            if not state.kafka.external:
                _kafka_up(state, log, spawned)
            if not state.postgres.external:
                _postgres_up(state, log, spawned)
            if "prometheus" in with_services:
                _prometheus_up(state, log, spawned)
            if "s3" in with_services:
                _s3_up(state, log, spawned)
                _s3_proxy_up(state, log, spawned)
        except BaseException:
            _save(state)
            if spawned:
                log(f"start-up failed; stopping what this run started: {', '.join(sorted(spawned))}")
                down(only=set(spawned), log=log)
            raise
        _save(state)
    return state, spawned


def down(only: set[str] | None = None, log=print, purge: bool = False) -> None:
    """Stop the services the lab started (all, or the named ones). External services are never touched.

    `purge` also deletes their data (the Kafka log, the PostgreSQL cluster wherever it lives, the object store's
    objects); jars, built binaries and the store's keys are kept.
    """
    with _locked(log):
        state = _load()
        if only is None or "kafka" in only:
            recorded = state.kafka
            _stop_lab_process(recorded, kafka.marker(_kafka_root()), "broker", log)
            state.kafka = Service("kafka", port=recorded.port, extra_port=recorded.extra_port)
            if purge:
                shutil.rmtree(_kafka_root(), ignore_errors=True)
        if only is None or "prometheus" in only:
            recorded = state.prometheus
            _stop_lab_process(recorded, prometheus.marker(), "server", log)
            state.prometheus = Service("prometheus", port=recorded.port)
            if purge:
                shutil.rmtree(prometheus.root(), ignore_errors=True)
        if only is None or "s3" in only or "s3-proxy" in only:
            recorded = state.s3_proxy
            _stop_lab_process(recorded, s3_proxy.marker(), None, log)
            state.s3_proxy = Service("s3-proxy", port=recorded.port)
        if only is None or "s3" in only:
            recorded = state.s3
            _stop_lab_process(recorded, s3store.marker(), "store", log)
            state.s3 = Service("s3", port=recorded.port)
            if purge:
                shutil.rmtree(s3store.data_dir(), ignore_errors=True)
        if only is None:
            from rtm_lab.engines import flink  # the engine comparison's PyFlink programs, if a run left one

            flink.stop_leftovers(log)
        if only is None or "postgres" in only:
            if postgres.server_pid(state_dir()):
                log("postgres  stopping")
            postgres.stop(state_dir(), state.postgres.pid, state.postgres.started)
            state.postgres = Service("postgres", port=state.postgres.port)
            if purge:
                postgres.remove(state_dir())
        _save(state)


def status() -> LabState:
    """What runs where, checked now (a recorded pid that no longer answers is reported as down)."""
    state = _load()
    for service in (state.kafka, state.postgres):
        env_name = KAFKA_ENV if service.name == "kafka" else POSTGRES_ENV
        if os.environ.get(env_name):
            service.external = True
            service.address = os.environ[env_name]
            service.running = _answers(service)
            continue
        if service.name == "kafka":
            service.pid, service.started = _lab_process(service, kafka.marker(_kafka_root()))
            if service.pid and not service.address:
                service.address = f"{ports.HOST}:{kafka.configured_port(_kafka_root())}"
        else:
            service.pid = postgres.server_pid(state_dir())
            port = postgres.server_port(state_dir()) if service.pid and not service.address else None
            if port is not None:
                service.address = postgres.dsn(port)
        service.running = bool(service.pid and service.address) and _answers(service)
        if service.pid and not service.running:
            service.detail = "running but not answering"
    found = processes.find(prometheus.marker())
    service = state.prometheus
    service.pid = found[0] if found else None
    service.port = prometheus.configured_port() if found else service.port
    service.address = prometheus.url(service.port) if found and service.port else ""
    service.running = bool(found) and prometheus.answers(service.port)
    if service.pid and not service.running:
        service.detail = "running but not answering"
    store = state.s3
    store.pid, store.started = _lab_process(store, s3store.marker())
    store.port = s3store.configured_port() if store.pid else store.port
    store.address = s3store.endpoint(store.port) if store.pid and store.port else ""
    store.running = bool(store.pid) and s3store.answers(store.port)
    if store.pid and not store.running:
        store.detail = "running but not answering"
    proxy = state.s3_proxy
    proxy.pid, proxy.started = _lab_process(proxy, s3_proxy.marker())
    proxy.port = s3_proxy.configured_port() if proxy.pid else proxy.port
    proxy.address = s3store.endpoint(proxy.port) if proxy.pid and proxy.port else ""
    proxy.running = bool(proxy.pid) and s3_proxy.answers(proxy.port)
    return state


def answering_broker(explicit: str | None = None) -> str:
    """The Kafka bootstrap a command should use (`explicit`, else the lab's), checked to answer: a Kafka client would
    retry an unreachable broker for minutes, so a command asks first with a short deadline."""
    bootstrap = explicit or status().kafka_bootstrap
    if not bootstrap:
        raise LabError("No Kafka broker: start the lab (`python scripts/lab.py up`) or pass --bootstrap.")
    if not kafka.answers(bootstrap):
        raise LabError(
            f"Kafka at {bootstrap} does not answer. Start it (`python scripts/lab.py up`) or fix --bootstrap."
        )
    return bootstrap


def _answers(service: Service) -> bool:
    if service.name == "kafka":
        return kafka.answers(service.address)
    return postgres.answers(service.address)


SPARK_CONF_ENV = "SPARK_CONF_DIR"


def env_exports(state: LabState, spark_conf: Path | None = None) -> str:
    """The shell exports for the lab's services, and for `spark_conf` (rtm_lab.spark_conf) when given."""
    lines = []
    if state.kafka.address:
        lines.append(f"export {KAFKA_ENV}={shlex.quote(state.kafka.address)}")
    if state.postgres.address:
        lines.append(f"export {POSTGRES_ENV}={shlex.quote(state.postgres.address)}")
    if state.prometheus.running:
        lines.append(f"export {PROMETHEUS_URL_ENV}={shlex.quote(state.prometheus.address)}")
    if state.s3.running:
        lines.append(f"export {S3_ENDPOINT_ENV}={shlex.quote(state.s3.address)}")
        lines.append(f"export {S3_CREDENTIALS_ENV}={shlex.quote(str(s3store.credentials_path()))}")
    if spark_conf is not None:
        lines.append(f"export {SPARK_CONF_ENV}={shlex.quote(str(spark_conf))}")
    return "\n".join(lines)


def describe(state: LabState) -> str:
    rows = []
    # Prometheus and the object store run only on request: listed when they run or were started before.
    optional = [s for s in (state.prometheus, state.s3, state.s3_proxy) if s.pid or s.running]
    for service in (state.kafka, state.postgres, *optional):
        where = redact(service.address) if service.address else "-"
        how = "external" if service.external else (f"pid {service.pid}" if service.pid else "")
        if service.detail and service.detail != "external":
            how += f" ({service.detail})"
        rows.append(f"{service.name:<9} {'up' if service.running else 'down':<5} {where} {how}".rstrip())
    return "\n".join(rows)
