"""The files the settings read: the organizations' key file, a CA bundle, the archive's default home."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import orjson

from worker.config.env import Env
from worker.config.values import ArchiveDirectory, ArchiveTarget, ConfigError, Secret
from worker.limits import REPORT_ID


def default_archive(e: Env) -> ArchiveTarget | None:
    """A folder in the user's data directory (XDG_DATA_HOME, else ~/.local/share); off without either."""
    data_home = e.text("XDG_DATA_HOME")
    if data_home is None:
        home = e.text("HOME")
        if home is None:
            return None
        data_home = str(Path(home) / ".local" / "share")
    return ArchiveDirectory(str(Path(data_home) / "research-worker" / "archive"))


def load_org_keys(path: str | None) -> Mapping[str, Secret]:
    """``{org_id: key}`` from the key file; a bad file stops start-up, naming the entry, never a key."""
    if path is None:
        return MappingProxyType({})
    variable = "RESEARCH_ORG_KEYS_FILE"
    try:
        raw = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise ConfigError(f"{variable}: {path} is not JSON") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{variable}: must be a JSON object mapping org ids to keys")
    org_keys: dict[str, Secret] = {}
    for position, (org_id, key) in enumerate(raw.items(), start=1):
        # The org id is not shown when it is invalid: a file written backwards would show a key.
        if not REPORT_ID.fullmatch(org_id):
            raise ConfigError(
                f"{variable}: entry {position} has an org id that is not 1-200 letters, digits and -_.:"
            )
        if not isinstance(key, str) or not key or any(not ch.isprintable() or ch.isspace() for ch in key):
            raise ConfigError(f"{variable}: the key of org {org_id!r} must be one word of printable text")
        org_keys[org_id] = Secret(key)
    return MappingProxyType(org_keys)


def readable_file(raw: str) -> str:
    with open(raw, "rb"):
        pass
    return raw
