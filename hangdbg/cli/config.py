"""``hangdbg.toml``: the defaults of any long option, for a site, a user or a project.

Files read, later ones overriding earlier ones (:func:`config_files`): ``/etc/hangdbg.toml``,
``$XDG_CONFIG_HOME/hangdbg.toml`` (``~/.config/hangdbg.toml`` when the variable is unset, as the
XDG Base Directory specification says), ``./hangdbg.toml``; ``HANGDBG_CONFIG=FILE`` names one
file instead of all three (``HANGDBG_CONFIG=/dev/null``: none).

Format (TOML, read with the standard library's :mod:`tomllib`): top-level keys apply to every
command that has that option; a ``[dump]``, ``[watch]``... table applies to that command only
(and wins over the top-level keys of the same file). Keys are long option names, with dashes or
underscores (``remote-setup``, ``srun_arg``); a flag takes ``true``/``false`` (``native = true``,
``no-adapt = true``); a repeatable option or one taking several values takes a list
(``srun-arg = ["--overlap"]``) or one value. Each value goes through the option's own type and
choices, so a file cannot set what the command line could not.

The values become the parser's defaults (``set_defaults``): the command line always wins (a
repeatable option's values given on the command line are added to the file's). An unknown key
or table is a warning (a site file serves several versions of hangdbg); a TOML syntax error or
a value the option refuses is a usage error naming the file (and line, or key). The internal
commands (``agent``, ``check-node``) take no file: the coordinator passes them their options.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import UsageError

__all__ = ["CONFIG_ENV", "config_files", "apply_config", "Applied", "SITE_CONFIG"]

CONFIG_ENV = "HANGDBG_CONFIG"
"""The environment variable naming the one config file to read instead of the usual three."""

SITE_CONFIG = Path("/etc/hangdbg.toml")
NAME = "hangdbg.toml"


@dataclass
class Applied:
    """What the config files set: ``dests`` maps each option's dest to (file, value);
    ``flags`` each dest to the option's name (``--remote-setup``)."""

    dests: dict[str, tuple[str, Any]] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """One line per option set, for ``-v``: ``config /etc/hangdbg.toml set --remote-setup``."""
        return [f"config {path} set {self.flags[dest]}" for dest, (path, _) in self.dests.items()]


def config_files(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> list[Path]:
    """The config files to read, in order (later ones override earlier ones): ``$HANGDBG_CONFIG``
    alone when set, else those of ``/etc/hangdbg.toml``, ``$XDG_CONFIG_HOME/hangdbg.toml``
    (default ``~/.config``) and ``./hangdbg.toml`` that exist.

    Raises:
        UsageError: ``HANGDBG_CONFIG`` names a file that does not exist.
    """
    env = os.environ if env is None else env
    named = env.get(CONFIG_ENV)
    if named:
        path = Path(named)
        if not path.exists():
            raise UsageError(f"{CONFIG_ENV}={named}: no such file",
                             help=f"point {CONFIG_ENV} at a hangdbg.toml, or unset it to read the usual files")
        return [path]
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    here = cwd if cwd is not None else Path.cwd()
    return [p for p in (SITE_CONFIG, Path(xdg) / NAME, here / NAME) if p.is_file()]


def read_config(path: Path) -> dict[str, Any]:
    """One file's TOML table.

    Raises:
        UsageError: it cannot be read, or is not TOML (the message names the line and column).
    """
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise UsageError(f"config file {path}: {exc}", help="fix the TOML syntax (https://toml.io)") from None
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror or exc}") from None


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every long option of ``parser`` by its name without dashes (``remote-setup``)."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        for opt in action.option_strings:
            if opt.startswith("--"):
                found[opt[2:]] = action
    return found


def _convert_one(action: argparse.Action, value: Any) -> Any:
    if isinstance(value, (dict, list)) or isinstance(value, bool):
        raise ValueError(f"expected one value, not {type(value).__name__}")
    converted = action.type(str(value)) if callable(action.type) else str(value)  # as argparse converts argv
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"must be one of {', '.join(map(str, action.choices))}")
    return converted


def convert(action: argparse.Action, value: Any) -> Any:
    """``value`` (from TOML) as the command line would give it to ``action``: a flag's
    ``true``/``false``, a list for an option that takes several values or repeats, else one value
    through the option's type and choices.

    Raises:
        ValueError, TypeError, argparse.ArgumentTypeError: a value the option refuses.
    """
    if action.nargs == 0:  # store_true / store_false / store_const: the flag given or not
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return action.const if value else action.default
    many = isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*") or isinstance(action.nargs, int)
    if not many:
        return _convert_one(action, value)
    items = value if isinstance(value, list) else [value]
    if action.nargs == "+" and not items:
        raise ValueError("expected at least one value")
    return [_convert_one(action, v) for v in items]


def _entries(data: dict[str, Any], command: str, commands: Callable[[], set[str]],
             warn: Callable[[str], None], path: Path) -> list[tuple[str, str, Any]]:
    """(key as written, option name, value) of one file for ``command``: top-level keys, then its table."""
    top = [(k, k, v) for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict) and name not in commands():
            warn(f"config {path}: unknown table [{name}] (not a hangdbg command): ignored")
    table = data.get(command)
    mine = [(f"[{command}] {k}", k, v) for k, v in table.items()] if isinstance(table, dict) else []
    return [(shown, key.replace("_", "-"), v) for shown, key, v in top + mine]


def apply_config(parser: argparse.ArgumentParser, command: str, warn: Callable[[str], None],
                 files: list[Path] | None = None, known: Callable[[], dict[str, set[str]]] | None = None) -> Applied:
    """Set the defaults of ``command``'s ``parser`` from the config files (:func:`config_files`
    unless ``files``). ``known``: every command's long options (for telling a top-level key of
    another command from an unknown one; called only when a key is not ``command``'s; without
    it, such a key is unknown); ``warn`` takes one line.

    Raises:
        UsageError: a file that cannot be read or parsed, a value its option refuses.
    """
    applied = Applied()
    files = config_files() if files is None else files
    if not files:
        return applied
    options = _options(parser)
    cache: dict[str, set[str]] = {}

    def everyone() -> dict[str, set[str]]:
        if not cache:
            cache.update(known() if known is not None else {command: set(options)})
        return cache

    defaults: dict[str, Any] = {}
    for path in files:
        for shown, key, value in _entries(read_config(path), command, lambda: set(everyone()), warn, path):
            action = options.get(key)
            if action is None:
                if shown.startswith("[") or not any(key in opts for opts in everyone().values()):
                    warn(f"config {path}: unknown option {shown!r} ({'not an option of ' + command if shown.startswith('[') else 'no command has --' + key}): ignored")
                continue
            try:
                defaults[action.dest] = convert(action, value)
            except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
                raise UsageError(f"config file {path}: {shown} = {value!r}: {exc}",
                                 help=f"give a value that --{key} takes (hangdbg {command} --help)") from None
            applied.dests.pop(action.dest, None)  # the order shown is the order set
            applied.dests[action.dest] = (str(path), defaults[action.dest])
            applied.flags[action.dest] = f"--{key}"
    if defaults:
        parser.set_defaults(**defaults)
    return applied
