"""The command line's path options take local (or mounted) paths, never a URL, except the
options typed :func:`data_location` (``--data-dir`` of ``prepare``, ``run`` and ``grade``), which
also take a store URL (issue 34, swarm_evo/store/data.py).

``Path("s3://bucket/data")`` is the relative path ``s3:/bucket/data``: without this check
``swarm-evo prepare … --data-dir s3://bucket/data`` wrote a folder named ``s3:`` in the working
directory and said it had prepared the competition "in s3:/bucket/data". Every ``Path``-valued
argument is checked once, after parsing, for every command.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

URL_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
"""A scheme and ``:/`` (what is left of ``scheme://`` once ``Path`` collapsed the slashes):
``s3:/``, ``gs:/``, ``sftp:/``, ``file:/``, ``https:/``. fsspec reads the same prefix as a
protocol."""


STORE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""``scheme://``: a store URL (swarm_evo.store.location.is_url; not imported here, so that parsing
the command line does not import fsspec)."""


def data_location(text: str) -> str | Path:
    """The ``type`` of an option that takes a local folder or a store URL: ``scheme://...`` kept
    as a string (``Path`` would collapse its ``//``), anything else a ``Path`` (so a ``s3:/x``
    that lost a slash is still refused by :func:`url_argument`)."""
    return text if STORE_URL.match(text) else Path(text)


def _actions(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The actions of ``parser`` and of the sub-commands ``args`` chose, depth first."""
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                yield from _actions(chosen, args)


def _option_name(parser: argparse.ArgumentParser, args: argparse.Namespace, dest: str) -> str:
    for action in _actions(parser, args):
        if action.dest == dest:
            return action.option_strings[0] if action.option_strings else (action.metavar or dest.upper())
    return dest


def url_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The bad-input message for the first ``Path`` argument of ``args`` that is a URL, naming
    its option (``--data-dir``) and the value as given; None when every path is local."""
    for dest, value in vars(args).items():
        if isinstance(value, Path) and URL_PREFIX.match(str(value)):
            url = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*):/(?!/)", r"\1://", str(value))
            return (f"{_option_name(parser, args, dest)} {url}: a URL, but swarm-evo takes a local or mounted "
                    "path here; copy the files to a folder this machine sees and give its path")
    return None
