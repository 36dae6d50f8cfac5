"""Named bearer tokens with roles (api.md §16): `read` sees runs, `operate` may also change them.

`create_app(tokens={name: {"role": "read"|"operate", "token": "..."}})`, or `"sha256": <hex
digest of the token>` instead of `"token"`; `reactorflow dashboard --tokens FILE` reads that
mapping as JSON. The single `token=` (`--token`, `REACTORFLOW_DASHBOARD_TOKEN`) is one
`operate` token named `"token"`. Only the SHA-256 digest of each token is kept, and a
presented token is compared with every digest in constant time (`hmac.compare_digest`).

No error message, log line or repr ever holds a token's text: entries are named by their name.
Kept apart from the Starlette app so the CLI can check a token file without the web extra.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from reactorflow.errors import ConfigurationError

SINGLE_TOKEN_NAME = "token"
"""The name of the one `operate` token given by `token=` / `--token`."""


class Role(StrEnum):
    """What a token may do: `read` (every GET), `operate` (also every change)."""

    READ = "read"
    OPERATE = "operate"


class TokenConfigError(ConfigurationError):
    """A tokens mapping (or file) with a bad entry: one line naming the entry, never the token.

    Attributes:
        entry: The entry's name (`None` when the mapping as a whole is at fault).
        source: Where the mapping came from (`create_app(tokens=)` or the file's path).
    """

    def __init__(self, source: str, entry: str | None, problem: str) -> None:
        where = f"{source}: entry {entry!r}" if entry is not None else source
        super().__init__(f"{where}: {problem}", option="tokens")
        self.entry = entry
        self.source = source


@dataclass(frozen=True)
class NamedToken:
    """One token, by name and role; only its SHA-256 digest is kept."""

    name: str
    role: Role
    digest: bytes = field(repr=False)

    def may_change(self) -> bool:
        """Whether this token may make a mutating request."""
        match self.role:
            case Role.OPERATE:
                return True
            case Role.READ:
                return False


def digest_of(token: str) -> bytes:
    """The SHA-256 digest of a token's text (what `"sha256"` gives, as hex)."""
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class TokenSet:
    """The tokens a server accepts."""

    tokens: tuple[NamedToken, ...]

    def identify(self, presented: str) -> NamedToken | None:
        """The token `presented` is, else None; compares with every token in constant time."""
        given = digest_of(presented)
        found = None
        for token in self.tokens:  # (no early exit: the time never tells which entry matched)
            if hmac.compare_digest(given, token.digest):
                found = token
        return found


_HEX = frozenset(string.hexdigits)


def _entry(source: str, name: object, value: object) -> NamedToken:
    if not isinstance(name, str) or not name.strip():
        raise TokenConfigError(source, None, f"a token's name must be a non-empty string, not "
                               f"{name!r:.40}")
    if not isinstance(value, Mapping):
        raise TokenConfigError(source, name, 'give an object {"role": "read"|"operate", '
                               '"token": "..."} (or "sha256": <hex digest> instead of "token")')
    unknown = sorted(str(k) for k in value if k not in ("role", "token", "sha256"))
    if unknown:
        raise TokenConfigError(source, name, f"unknown key(s) {', '.join(unknown)}: use role, "
                               "and token or sha256")
    role = value.get("role")
    if role not in tuple(Role):
        raise TokenConfigError(source, name, f"role {role!r:.40} is not one of read, operate")
    has_token, has_digest = "token" in value, "sha256" in value
    if has_token and has_digest:
        raise TokenConfigError(source, name, "give token (the token's text) or sha256 (its "
                               "SHA-256 hex digest), not both")
    if not has_token and not has_digest:
        raise TokenConfigError(source, name, "no token: give token (the token's text) or "
                               "sha256 (its SHA-256 hex digest)")
    if has_token:
        text = value["token"]
        if not isinstance(text, str) or not text:
            raise TokenConfigError(source, name, "token must be a non-empty string")
        digest = digest_of(text)
    else:
        hexed = value["sha256"]
        if not isinstance(hexed, str) or len(hexed) != 64 or not set(hexed) <= _HEX:
            raise TokenConfigError(source, name, "sha256 must be 64 hex digits (the SHA-256 of "
                                   "the token, e.g. from: printf %s TOKEN | sha256sum)")
        digest = bytes.fromhex(hexed)
    return NamedToken(name, Role(role), digest)


def token_set(tokens: object, *, source: str = "create_app(tokens=)",
              single: str | None = None) -> TokenSet:
    """The tokens of a mapping `{name: {"role", "token" | "sha256"}}`, plus the `single`
    operate token (named `"token"`) when given.

    Args:
        tokens: The mapping, by name.
        source: Where it came from, for the error messages.
        single: The single `token=` / `--token` (an `operate` token named `"token"`), or None.

    Raises:
        TokenConfigError: an entry with a bad role, without token or sha256 or with both, a
            malformed digest, or a token (or name) given twice; one line naming the entry.
    """
    if not isinstance(tokens, Mapping):
        raise TokenConfigError(source, None, "give an object mapping each token's name to "
                               '{"role": "read"|"operate", "token": "..."}')
    found = [_entry(source, name, value) for name, value in tokens.items()]
    if single is not None:
        if SINGLE_TOKEN_NAME in tokens:
            raise TokenConfigError(source, SINGLE_TOKEN_NAME, "the name is taken by the single "
                                   "token (--token / token=): rename the entry")
        found.append(NamedToken(SINGLE_TOKEN_NAME, Role.OPERATE, digest_of(single)))
    seen: dict[bytes, str] = {}
    for token in found:
        if token.digest in seen:
            raise TokenConfigError(source, token.name, f"the same token as entry "
                                   f"{seen[token.digest]!r}: give each name its own token")
        seen[token.digest] = token.name
    return TokenSet(tuple(found))


def _no_duplicates(source: str, pairs: list[tuple[str, object]]) -> dict[str, object]:
    names: dict[str, object] = {}
    for name, value in pairs:
        if name in names:
            raise TokenConfigError(source, name, "the name is given twice: give each token "
                                   "one entry")
        names[name] = value
    return names


def read_token_file(path: str | Path) -> dict[str, dict[str, str]]:
    """The `create_app(tokens=)` mapping a JSON file holds, checked.

    Args:
        path: The file.

    Raises:
        TokenConfigError: the file cannot be read, is not JSON, or has a bad entry (one line
            naming the file and the entry; never a token's text).
    """
    source = f"token file {str(path)!r}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TokenConfigError(source, None, f"cannot be read: {exc.strerror}") from None
    try:
        mapping = json.loads(text, object_pairs_hook=lambda pairs: _no_duplicates(source, pairs))
    except json.JSONDecodeError as exc:  # (its message quotes no text of the file)
        raise TokenConfigError(source, None, f"is not JSON: {exc.msg} at line {exc.lineno} "
                               f"column {exc.colno}") from None
    token_set(mapping, source=source)  # (checked here, to name the file in an error)
    return dict(mapping)  # (checked: every entry is an object of strings)
