"""A store's URL as messages may show it (spec: "Cache database"): its password masked,
and the password itself, to be kept out of every text."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"


def masked(location: str) -> str:
    """``location`` as messages may show it: a URL's password (in its user info, or a
    ``password=`` query parameter) replaced by ``***``."""
    try:
        parts = urlsplit(location)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if sep else netloc
    query = "&".join(
        f"{part.partition('=')[0]}={MASK}" if _is_password(part) else part
        for part in parts.query.split("&")
        if part
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _is_password(parameter: str) -> bool:
    return parameter.partition("=")[0].strip().lower() == "password"


def password_of(location: str) -> str | None:
    """The password a URL carries (user info or ``password=``), to keep out of every text."""
    try:
        parts = urlsplit(location)
        if parts.password:
            return unquote(parts.password)
    except ValueError:
        return None
    for part in parts.query.split("&"):
        if _is_password(part) and part.partition("=")[2]:
            return unquote(part.partition("=")[2])
    return None
