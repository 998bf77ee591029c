"""Where each world lives: an external Neo4j (config file or environment) or the local server.

External configuration, first match wins:

1. ``$CYPHERTURN_NEO4J_CONFIG`` names a YAML (or JSON) file::

       default: {uri: "neo4j+s://xxxx.databases.neo4j.io", user: neo4j, password: secret, database: "{world_dash}"}
       worlds:
         ancient_empire: {uri: "bolt://db-host:7687", database: empire}

   A world takes its own entry over ``default``; keys missing from both fall back to user ``neo4j``,
   no password and the server's default database. ``{world}`` and ``{world_dash}`` (underscores turned
   into dashes, as Neo4j database names allow no underscores) are filled in.
2. ``$CYPHERTURN_NEO4J_URI`` (with ``_USER``, ``_PASSWORD``, ``_DATABASE``, same placeholders) for all worlds.
3. Otherwise the local server (``graphs.server``), started on first use unless
   ``$CYPHERTURN_NO_AUTOSTART`` is set.

Every caller gets one pooled driver per (uri, user) whichever way the world was configured.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import neo4j
import yaml

from cypherturn.errors import InputError
from graphs import server


class ConfigError(InputError):
    """The external Neo4j configuration is malformed or does not cover a world."""


@dataclass(frozen=True)
class Target:
    world: str
    uri: str
    user: str | None
    password: str | None
    database: str | None
    local: bool

    def describe(self) -> str:
        db = f" database {self.database}" if self.database else ""
        return f"{self.uri}{db}" + (" (local)" if self.local else "")


def _fill(value: str | None, world: str) -> str | None:
    if value is None:
        return None
    return str(value).replace("{world_dash}", world.replace("_", "-")).replace("{world}", world)


def _from_mapping(world: str, entry: dict) -> Target:
    if not entry.get("uri"):
        raise ConfigError(f"no 'uri' configured for world {world!r}")
    return Target(world=world, uri=_fill(entry["uri"], world), user=_fill(entry.get("user", "neo4j"), world),
                  password=_fill(entry.get("password"), world), database=_fill(entry.get("database"), world),
                  local=False)


def external_config() -> dict | None:
    """The external configuration as a mapping {"default": {...}, "worlds": {...}}, or None."""
    path = os.environ.get("CYPHERTURN_NEO4J_CONFIG")
    if path:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"CYPHERTURN_NEO4J_CONFIG={path}: cannot read it ({exc})") from exc
        try:
            raw = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ConfigError(f"CYPHERTURN_NEO4J_CONFIG={path}: not valid YAML/JSON ({exc})") from exc
        if not isinstance(raw, dict) or not (isinstance(raw.get("default", {}), dict)
                                             and isinstance(raw.get("worlds", {}), dict)):
            raise ConfigError(f"CYPHERTURN_NEO4J_CONFIG={path}: expected keys 'default' and/or 'worlds' "
                              "holding mappings")
        return {"default": raw.get("default") or {}, "worlds": raw.get("worlds") or {}}
    uri = os.environ.get("CYPHERTURN_NEO4J_URI")
    if uri:
        default = {"uri": uri, "user": os.environ.get("CYPHERTURN_NEO4J_USER", "neo4j"),
                   "password": os.environ.get("CYPHERTURN_NEO4J_PASSWORD"),
                   "database": os.environ.get("CYPHERTURN_NEO4J_DATABASE")}
        return {"default": default, "worlds": {}}
    return None


def resolve(world: str, *, autostart: bool | None = None) -> Target:
    """The connection target of ``world``; starts the local server when it is needed and allowed."""
    config = external_config()
    if config is not None:
        entry = {**config["default"], **(config["worlds"].get(world) or {})}
        return _from_mapping(world, entry)
    if autostart is None:
        autostart = not os.environ.get("CYPHERTURN_NO_AUTOSTART")
    state = server.running_state()
    if state is not None and world in state.ports and autostart and not server.port_open(state.ports[world]):
        # alive but not listening: starting (serve waits for it) or hung on its way out (serve replaces it)
        state = server.serve()
    if state is None or world not in state.ports:
        if not autostart:
            raise ConfigError(f"no external Neo4j is configured and the local server is not running "
                              f"for world {world!r}; run `python -m graphs serve`")
        state = server.serve()
        if world not in state.ports:
            raise ConfigError(f"unknown world {world!r}: the local server serves {sorted(state.ports)}")
    return Target(world=world, uri=state.uri(world), user=None, password=None, database=None, local=True)


MAX_POOL_SIZE = 64  # connections per server and process; the executor bounds each wait for one by its call's deadline
_drivers: dict[tuple, neo4j.Driver] = {}
_lock = threading.Lock()


def driver(target: Target) -> neo4j.Driver:
    """One pooled driver per (uri, user, password), shared by every caller in the process."""
    key = (target.uri, target.user, target.password)
    with _lock:
        drv = _drivers.get(key)
        if drv is None:
            auth = (target.user, target.password or "") if target.password is not None else None
            drv = neo4j.GraphDatabase.driver(
                target.uri, auth=auth, max_connection_pool_size=MAX_POOL_SIZE, connection_timeout=5.0,
                connection_acquisition_timeout=30.0, max_transaction_retry_time=0.0,
                user_agent="cypherturn-gym", notifications_min_severity="OFF")
            _drivers[key] = drv
        return drv


def close_all() -> None:
    with _lock:
        for drv in _drivers.values():
            drv.close()
        _drivers.clear()
