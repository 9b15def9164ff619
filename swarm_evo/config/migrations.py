"""The one place for renamed and removed configuration keys (issue 55, item 3).

A run records its configuration in its journal (``info.config``); a config file outlives the
code that wrote it. When a key is renamed or removed, its line goes in :data:`MIGRATIONS` and
every reading of a configuration (a file, ``config_data``, dotted overrides, a resumed run's
saved config: :class:`swarm_evo.config.RunConfig` applies it before it validates) reads the old
key as the new one, or drops a removed one, with one warning naming both. So a run started
before a rename resumes, and unknown keys stay errors.

A rename is then two edits: the field's new name in its section's module, and its line here::

    Renamed("search.tournament_k", "search.tournament_size", "issue 60: says what it holds"),
    Removed("sandbox.legacy_flag", "issue 61: every backend now does it"),
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

from swarm_evo.config.base import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Renamed:
    """``old`` (a dotted key, e.g. ``search.tournament_k``) is now ``new`` (dotted, any section)."""

    old: str
    new: str
    why: str


@dataclass(frozen=True)
class Removed:
    """``key`` (dotted) is read no more; a configuration that still gives it loses it, with ``why``."""

    key: str
    why: str


MIGRATIONS: tuple[Renamed | Removed, ...] = ()
"""Every renamed or removed key, oldest first (none yet: each key of the first configuration is
still read)."""


def _split(dotted: str) -> tuple[list[str], str]:
    *parents, leaf = dotted.split(".")
    return parents, leaf


def _pop(data: dict, dotted: str) -> tuple[bool, Any]:
    parents, leaf = _split(dotted)
    target: Any = data
    for part in parents:
        target = target.get(part) if isinstance(target, dict) else None
    if isinstance(target, dict) and leaf in target:
        return True, target.pop(leaf)
    return False, None


def _has(data: dict, dotted: str) -> bool:
    parents, leaf = _split(dotted)
    target: Any = data
    for part in parents:
        target = target.get(part) if isinstance(target, dict) else None
    return isinstance(target, dict) and leaf in target


def _put(data: dict, dotted: str, value: Any) -> None:
    parents, leaf = _split(dotted)
    target = data
    for part in parents:
        if not isinstance(target.get(part), dict):
            target[part] = {} if target.get(part) is None else target[part]
        if not isinstance(target[part], dict):
            return  # a section given as a scalar (``store: URL``): its own validator reads it
        target = target[part]
    target[leaf] = value


def migrate(data: Any, source: str = "config") -> Any:
    """``data`` (a configuration mapping) with every key of :data:`MIGRATIONS` read as it is
    named now: a renamed key moved to its new name, a removed key dropped; each logged once, as a
    warning naming the old key, the new one (or the reason) and ``source``. The input is not
    changed; anything but a mapping is returned as it is (validation names it).

    Raises:
        ConfigError: both a renamed key and its new name are given (the message names both and
            the fix: keep the new one).
    """
    if not isinstance(data, dict):
        return data
    if not any(_has(data, e.old if isinstance(e, Renamed) else e.key) for e in MIGRATIONS):
        return data
    data = copy.deepcopy(data)
    for entry in MIGRATIONS:
        if isinstance(entry, Renamed):
            if not _has(data, entry.old):
                continue
            if _has(data, entry.new):
                raise ConfigError(f"{source}: '{entry.old}' was renamed '{entry.new}' ({entry.why}) and both are "
                                  f"given: keep '{entry.new}' and remove '{entry.old}'")
            _, value = _pop(data, entry.old)
            _put(data, entry.new, value)
            log.warning("%s: '%s' is now '%s' (%s); read as '%s'", source, entry.old, entry.new, entry.why, entry.new)
        else:
            found, _ = _pop(data, entry.key)
            if found:
                log.warning("%s: '%s' is read no more (%s); ignored", source, entry.key, entry.why)
    return data


def migrate_dotted(key: str) -> str | None:
    """The name a dotted override key (``search.tournament_k``) has now; None when it was removed."""
    for entry in MIGRATIONS:
        if isinstance(entry, Renamed) and entry.old == key:
            key = entry.new
        elif isinstance(entry, Removed) and entry.key == key:
            log.warning("override '%s' is read no more (%s); ignored", key, entry.why)
            return None
    return key
