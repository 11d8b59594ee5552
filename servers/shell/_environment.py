"""The environment a command runs with: an allow-list of the server's own variables plus configured additions.

Commands are written by a model, and a model can be steered by what it reads (a README, a web page, a test's
output), so anything in a command's environment can end up printed or sent away. Loom's own environment holds API
keys and agent sockets; a command inherits none of them. What passes by default is what builds and everyday tools
need and what is not a credential: the search path and home, user and shell, locale and terminal, the time zone,
the temporary directory, the XDG base directories, where toolchains live, and which CA certificates to trust.

Left out on purpose, though harmless-looking: ``SSH_AUTH_SOCK``, ``DBUS_SESSION_BUS_ADDRESS``, ``DOCKER_HOST``,
``XDG_RUNTIME_DIR``, ``DISPLAY`` and ``WAYLAND_DISPLAY`` (each names a socket that acts with the user's authority),
and proxy variables (their URLs often carry a password). A default name that looks like a secret (``KEY``,
``TOKEN``, ``SECRET``, ``PASSWORD``, ...) is dropped too, which matters for the ``LC_*`` pattern. Anything else, a
secret included, passes only when it is configured by its exact name (``env_pass``) or given a fixed value
(``env_set``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DEFAULT_NAMES", "CommandEnvironment"]

DEFAULT_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TZ",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        # Where toolchains live: a build that cannot find its compiler fails in confusing ways.
        "JAVA_HOME",
        "GOPATH",
        "GOROOT",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "PYENV_ROOT",
        "NVM_DIR",
        # Which CA certificates to trust: behind a TLS-inspecting proxy nothing downloads without them.
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "PIP_CERT",
        "AWS_CA_BUNDLE",
        "NIX_SSL_CERT_FILE",
    }
)
"""Variables passed from the server's environment by default (plus every ``LC_*``)."""

_DEFAULT_PREFIXES = ("LC_",)

_SECRET_LOOKING = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|AUTH", re.IGNORECASE)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CommandEnvironment:
    """The environment every command gets, fixed when the server is built.

    Args:
        source: The server's own environment, read once here.
        env_pass: Names of further variables to pass from source when they are set (secrets only this way).
        env_set: Variables given fixed values; they win over everything else.
        sandbox_root: The writable root when commands run in the sandbox, else None. There TMPDIR passes only if it
            lies inside the root: elsewhere is read-only, and a directory under /tmp does not exist in the
            sandbox's private /tmp, so tools fall back to /tmp instead of failing.

    Raises:
        ValueError: If a name is not a valid variable name or a value contains a NUL byte.
    """

    def __init__(
        self,
        source: Mapping[str, str],
        *,
        env_pass: Sequence[str] = (),
        env_set: Mapping[str, str] | None = None,
        sandbox_root: Path | None = None,
    ) -> None:
        fixed = dict(env_set or {})
        if isinstance(env_pass, str):
            # A bare string would be passed letter by letter; that is never what was meant.
            raise ValueError(f"env_pass must be a list of names, got the string {env_pass!r}")
        for name in [*env_pass, *fixed]:
            if not _NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid environment variable name (letters, digits, _)")
        for name, value in fixed.items():
            if "\x00" in value:
                raise ValueError(f"the value given for {name} contains a NUL byte")
        values = {name: value for name, value in source.items() if _passes_by_default(name)}
        tmpdir = values.get("TMPDIR")
        if sandbox_root is not None and tmpdir is not None and not Path(tmpdir).is_relative_to(sandbox_root):
            del values["TMPDIR"]
        values.update({name: source[name] for name in env_pass if name in source})
        values.update(fixed)
        self._values = values
        self._passed = tuple(dict.fromkeys(name for name in [*env_pass, *fixed] if name in values))

    @property
    def values(self) -> dict[str, str]:
        """A fresh copy of the variables, to hand to a new process."""
        return dict(self._values)

    @property
    def configured(self) -> tuple[str, ...]:
        """The configured names (passed or set) that commands actually get, in configuration order."""
        return self._passed

    def describe(self) -> str:
        """Sentences for the model about what the environment holds and how a variable is added."""
        extra = f" plus the configured {', '.join(self._passed)}" if self._passed else ""
        return (
            f"Commands get a reduced environment: PATH, HOME, USER, SHELL, locale, TERM, TZ, toolchain and CA "
            f"certificate locations{extra}; API keys, tokens and agent sockets (SSH_AUTH_SOCK, DOCKER_HOST, D-Bus) "
            f"are left out on purpose. If a command needs another variable, do not search for credentials: ask the "
            f"user to add it to the shell server's configuration (shell.env, or --pass-env NAME / "
            f"--set-env NAME=VALUE on 'loom server shell')."
        )


def _passes_by_default(name: str) -> bool:
    if name not in DEFAULT_NAMES and not name.startswith(_DEFAULT_PREFIXES):
        return False
    return _SECRET_LOOKING.search(name) is None
