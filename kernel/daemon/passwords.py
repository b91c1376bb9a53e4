"""Password hashing for user/password login: scrypt (RFC 7914) from the standard library.

A stored hash is one string carrying everything needed to check it::

    scrypt$<n>$<r>$<p>$<salt, base64>$<key, base64>

with a fresh 16-byte random salt per password and a 32-byte derived key. Parameters are read
back from the string, so raising :data:`N` later leaves old hashes valid
(:func:`needs_rehash` tells when to store a fresh one). The default cost (``n = 2**14, r = 8,
p = 1``: 16 MiB, about 50 ms on one core) follows the scrypt paper's interactive-login
setting and OWASP's password storage guidance (2023).

Passwords are Unicode-normalised to NFC before hashing and before checking (NIST SP 800-63B,
section 5.1.1.2), so "é" typed as one code point or as "e" + combining accent is the same
password. A password may not contain C0 control characters (U+0000–U+001F, NUL included):
:func:`control_character_error` tells, and the REST models refuse such a password with 422.

Hashing is CPU-bound: call these from a worker thread (``trio.to_thread.run_sync``), never
on the event loop.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import secrets
import unicodedata

__all__ = [
    "MAX_LENGTH",
    "MIN_LENGTH",
    "N",
    "P",
    "R",
    "control_character_error",
    "hash_password",
    "needs_rehash",
    "normalize",
    "verify_nobody",
    "verify_password",
]

#: Accepted password length in characters (the REST models enforce it).
MIN_LENGTH = 8
MAX_LENGTH = 1024

#: scrypt cost parameters for new hashes.
N = 2**14
R = 8
P = 1

_SCHEME = "scrypt"
_SALT_BYTES = 16
_KEY_BYTES = 32
# Bounds on parameters read back from a stored string (a corrupt row must not cost gigabytes).
_MAX_N = 2**20
_MAX_R = 32
_MAX_P = 16
_C0 = re.compile(r"[\x00-\x1f]")


def normalize(password: str) -> str:
    """``password`` in Unicode normal form C (what is hashed and checked)."""
    return unicodedata.normalize("NFC", password)


def control_character_error(password: str) -> str | None:
    """Why ``password`` is refused (it contains a C0 control character, U+0000–U+001F), or
    ``None`` when it is acceptable. The message names the first offending character by its
    code point, never the password."""
    found = _C0.search(password)
    if found is None:
        return None
    return (
        f"a password may not contain control characters (found U+{ord(found.group()):04X} at position "
        f"{found.start() + 1}; NUL, tab and newline are refused too)"
    )


def _derive(password: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    maxmem = 128 * r * (n + p + 2) + 1024 * 1024  # what OpenSSL allocates, plus slack
    return hashlib.scrypt(normalize(password).encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=maxmem, dklen=dklen)


def hash_password(password: str, *, n: int = N, r: int = R, p: int = P) -> str:
    """The storable hash of ``password``, NFC-normalised (``scrypt$n$r$p$salt$key``, see the
    module docstring)."""
    salt = secrets.token_bytes(_SALT_BYTES)
    key = _derive(password, salt, n, r, p, _KEY_BYTES)
    return "$".join((_SCHEME, str(n), str(r), str(p), base64.b64encode(salt).decode(), base64.b64encode(key).decode()))


def _parse(stored: str) -> tuple[int, int, int, bytes, bytes] | None:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != _SCHEME:
        return None
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        return None
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 1 <= r <= _MAX_R and 1 <= p <= _MAX_P and salt and 16 <= len(key) <= 64):
        return None
    return n, r, p, salt, key


def verify_password(password: str, stored: str | None) -> bool:
    """Whether ``password`` (NFC-normalised) matches ``stored`` (constant-time compare of the
    derived keys).

    ``None`` or a malformed ``stored`` never matches (the same work is done as for a real hash,
    so the answer time does not tell whether the user has a password).
    """
    parsed = _parse(stored) if stored else None
    if parsed is None:
        verify_nobody(password)
        return False
    n, r, p, salt, key = parsed
    return hmac.compare_digest(_derive(password, salt, n, r, p, len(key)), key)


def verify_nobody(password: str) -> None:
    """Spend the time of one :func:`verify_password` against a throwaway hash (for an unknown
    user name, so timing does not reveal which names exist)."""
    n, r, p, salt, key = _parse(_dummy_hash())  # type: ignore[misc]
    hmac.compare_digest(_derive(password, salt, n, r, p, len(key)), key)


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` was made with other parameters than today's (store a fresh hash
    after the next successful login)."""
    parsed = _parse(stored)
    return parsed is None or parsed[:3] != (N, R, P)
