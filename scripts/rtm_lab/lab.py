"""Bring the whole lab up or down, report on it, and export its settings. The CLI is `scripts/lab.py`.

A service named by the user's environment (KAFKA_BOOTSTRAP_SERVERS, POSTGRES_DSN) is used as it is: the lab checks
that it answers and starts nothing for it.
"""

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rtm_lab import kafka, ports, postgres, processes
from rtm_lab.errors import LabError
from rtm_lab.paths import state_dir

KAFKA_ENV = "KAFKA_BOOTSTRAP_SERVERS"
POSTGRES_ENV = "POSTGRES_DSN"
KAFKA_PORT_ENV = "RTM_LAB_KAFKA_PORT"
POSTGRES_PORT_ENV = "RTM_LAB_POSTGRES_PORT"


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


@dataclass
class LabState:
    kafka: Service = field(default_factory=lambda: Service("kafka"))
    postgres: Service = field(default_factory=lambda: Service("postgres"))

    @property
    def kafka_bootstrap(self) -> str:
        return self.kafka.address

    @property
    def postgres_dsn(self) -> str:
        return self.postgres.address


def _state_file() -> Path:
    return state_dir() / "state.json"


def _load() -> LabState:
    try:
        raw = json.loads(_state_file().read_text())
        return LabState(kafka=Service(**raw["kafka"]), postgres=Service(**raw["postgres"]))
    except (OSError, ValueError, KeyError, TypeError):
        return LabState()


def _save(state: LabState) -> None:
    _state_file().parent.mkdir(parents=True, exist_ok=True)
    _state_file().write_text(json.dumps(asdict(state), indent=2, sort_keys=True))


def _env_port(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise LabError(f"{name}={value!r} is not a port number (1-65535). Fix it or unset it.")
    return int(value)


def _redact(dsn: str) -> str:
    # Never print a password: keep the DSN's shape, hide the secret.
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)


def _kafka_up(state: LabState, log) -> None:
    external = os.environ.get(KAFKA_ENV)
    if external:
        if not kafka.answers(external):
            raise LabError(
                f"{KAFKA_ENV}={external} does not answer a Kafka metadata request. Start that broker, fix the "
                f"address, or unset {KAFKA_ENV} to let the lab run its own."
            )
        state.kafka = Service("kafka", address=external, external=True, running=True, detail="external")
        return
    previous = state.kafka
    if processes.is_alive(previous.pid) and kafka.answers(previous.address):
        log(f"kafka     already running at {previous.address} (pid {previous.pid})")
        return
    processes.stop(previous.pid)
    port = ports.choose(_env_port(KAFKA_PORT_ENV), KAFKA_PORT_ENV, previous.port)
    controller_port = ports.choose(None, "", previous.extra_port, avoid={port})
    log(f"kafka     starting a KRaft broker on {ports.HOST}:{port} ...")
    pid = kafka.start(state_dir() / "kafka", port, controller_port)
    state.kafka = Service("kafka", f"{ports.HOST}:{port}", pid, port, controller_port, running=True)
    _save(state)
    log(f"kafka     ready at {state.kafka.address} (pid {pid})")


def _postgres_up(state: LabState, log) -> None:
    external = os.environ.get(POSTGRES_ENV)
    if external:
        if not postgres.answers(external):
            raise LabError(
                f"{POSTGRES_ENV} ({_redact(external)}) does not answer SELECT 1. Start that server, fix the DSN, "
                f"or unset {POSTGRES_ENV} to let the lab run its own."
            )
        state.postgres = Service("postgres", address=external, external=True, running=True, detail="external")
        return
    previous = state.postgres
    pid = postgres.server_pid(state_dir())
    if processes.is_alive(pid) and previous.address and postgres.answers(previous.address):
        log(f"postgres  already running at {_redact(previous.address)} (pid {pid})")
        return
    postgres.stop(state_dir())
    port = ports.choose(_env_port(POSTGRES_PORT_ENV), POSTGRES_PORT_ENV, previous.port)
    log(f"postgres  starting a private cluster on {ports.HOST}:{port} as {postgres.whoami()} ...")
    postgres.start(state_dir(), port)
    state.postgres = Service("postgres", postgres.dsn(port), postgres.server_pid(state_dir()), port, running=True)
    _save(state)
    log(f"postgres  ready at {_redact(state.postgres.address)} (pid {state.postgres.pid})")


def up(log=print) -> tuple[LabState, set[str]]:
    """Start what is not running; return the state and the names of services this call started.

    If a service fails to start, whatever this call started is stopped again, so a failed `up` leaves the lab as
    it found it rather than half-started.
    """
    state = _load()
    before = {"kafka": _is_running(state.kafka), "postgres": _is_running(state.postgres)}
    try:
        _kafka_up(state, log)
        _postgres_up(state, log)
    except BaseException:
        _save(state)
        partial = {name for name, was in before.items() if not was and getattr(state, name).running}
        partial -= {name for name in partial if getattr(state, name).external}
        if partial:
            log(f"start-up failed; stopping what this run started: {', '.join(sorted(partial))}")
            down(only=partial, log=log)
        raise
    _save(state)
    started = {name for name, was in before.items() if not was and not getattr(state, name).external}
    return state, started


def _is_running(service: Service) -> bool:
    if service.external or not service.address:
        return False
    if service.name == "kafka":
        return processes.is_alive(service.pid) and kafka.answers(service.address, timeout_s=2.0)
    return processes.is_alive(postgres.server_pid(state_dir())) and postgres.answers(service.address)


def down(only: set[str] | None = None, log=print) -> None:
    """Stop the services the lab started (all, or the named ones). External services are never touched."""
    state = _load()
    if only is None or "kafka" in only:
        if state.kafka.pid and not state.kafka.external:
            log(f"kafka     stopping (pid {state.kafka.pid})")
        processes.stop(state.kafka.pid)
        state.kafka = Service("kafka", port=state.kafka.port, extra_port=state.kafka.extra_port)
    if only is None or "postgres" in only:
        if processes.is_alive(postgres.server_pid(state_dir())):
            log("postgres  stopping")
        postgres.stop(state_dir())
        state.postgres = Service("postgres", port=state.postgres.port)
    _save(state)


def status() -> LabState:
    """What runs where, checked now (a recorded pid that no longer answers is reported as down)."""
    state = _load()
    for service in (state.kafka, state.postgres):
        if os.environ.get(KAFKA_ENV if service.name == "kafka" else POSTGRES_ENV):
            service.external = True
            service.address = os.environ[KAFKA_ENV if service.name == "kafka" else POSTGRES_ENV]
            service.running = (
                kafka.answers(service.address) if service.name == "kafka" else postgres.answers(service.address)
            )
            continue
        service.running = _is_running(service)
        if service.name == "postgres":
            service.pid = postgres.server_pid(state_dir())
    return state


def env_exports(state: LabState) -> str:
    lines = []
    if state.kafka.address:
        lines.append(f"export {KAFKA_ENV}={state.kafka.address}")
    if state.postgres.address:
        lines.append(f"export {POSTGRES_ENV}='{state.postgres.address}'")
    return "\n".join(lines)


def describe(state: LabState) -> str:
    rows = []
    for service in (state.kafka, state.postgres):
        where = _redact(service.address) if service.address else "-"
        how = "external" if service.external else (f"pid {service.pid}" if service.pid else "")
        rows.append(f"{service.name:<9} {'up' if service.running else 'down':<5} {where} {how}".rstrip())
    return "\n".join(rows)
