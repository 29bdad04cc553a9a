"""Where a read's bytes are stored and how to reach them: one ``Storage``.

Every entry point builds one ``Storage`` from what the user gave (the
keyword arguments of ``open_log``/``read_segment``/``verify``..., the
command line's ``--storage-option``/``--layout``/``--private-key``, Spark's
``storage.*``/``layout``/``privateKey`` options) and hands it, unchanged, to
the door (``kbatch.lib.open``), to plans and to Spark's slices:

    storage_options      fsspec options of a URL's filesystem (endpoint, keys, ...)
    filesystem           an fsspec filesystem object (paths are then paths in it)
    layout               "plain" (broker directories) | "tiered" (the plugin's bucket)
    private_key          RSA key(s) of encrypted tiered segments (kept as PEM bytes)
    block, concurrency   range size and GETs in flight of a ranged read
    retries              attempts after a transient failure
    remote_log_metadata  tiered: the segment states (only finished copies are read)

A ``Storage`` is frozen, hashable (plans and caches key on it) and
picklable (Spark ships it to executors); ``repr`` never shows a secret: a
storage option whose name suggests one (key, secret, password, token,
credential, ...) and key material print as ``***``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from kbatch.errors import ArgumentError, DecryptionError, KbatchError
from kbatch.lib.paths import uuid_text

LAYOUTS = ("plain", "tiered")
DEFAULT_BLOCK = 8 << 20          # one ranged GET of a scan
DEFAULT_CONCURRENCY = 4          # GETs in flight
DEFAULT_RETRIES = 5
MAX_KEY_FILE_BYTES = 1 << 20     # a PEM private key is a few KiB

# the keyword arguments that say where bytes are (the rest are decode options)
STORAGE_KEYS = ("storage_options", "filesystem", "layout", "private_key", "block",
                "concurrency", "retries", "remote_log_metadata")

_SECRET = re.compile(r"(secret|passw|token|credential|jaas|session|auth|private|"
                     r"(^|[._-])key($|[._-])|^key$|apikey|access.?key|sas|connection.?string)", re.I)


def is_secret_name(name: str) -> bool:
    """Whether an option named ``name`` may hold a secret (its value is
    never echoed in an error or a repr)."""
    return bool(_SECRET.search(str(name)))


def shown(name: str, value) -> str:
    """``value`` as an error message or a repr may show it: ``***`` for a
    secret, and inside a dict or a list (``client_kwargs``, ``config_kwargs``)
    each secret entry masked by its own name."""
    return "***" if is_secret_name(name) else _masked_repr(value)


def _masked_repr(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {shown(k, v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_masked_repr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


def _freeze(value):
    """A hashable copy of a storage option value (dicts and lists nested)."""
    if isinstance(value, dict):
        return ("__dict__", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("__list__", tuple(_freeze(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("__set__", tuple(sorted(_freeze(v) for v in value)))
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"storage option value of type {type(value).__name__} cannot be "
                            "used (expected str, numbers, booleans, lists or dicts)") from None
    return value


def _thaw(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("__dict__", "__list__",
                                                                     "__set__"):
        kind, items = value
        if kind == "__dict__":
            return {k: _thaw(v) for k, v in items}
        return [_thaw(v) for v in items]
    return value


class KeyRing:
    """RSA private keys of encrypted tiered segments, by key id (None: the
    key for any id). Holds PEM bytes only, so it pickles and hashes; the
    ``cryptography`` key objects are loaded on first use. Never shows key
    material: ``repr`` gives the number of keys and a fingerprint."""

    __slots__ = ("_pem", "_loaded", "_digest")

    def __init__(self, pems: dict):
        self._pem = dict(pems)
        self._loaded: dict = {}
        h = hashlib.sha256()
        for k in sorted(self._pem, key=str):
            h.update(str(k).encode() + b"\0" + self._pem[k] + b"\0")
        self._digest = h.hexdigest()

    @classmethod
    def of(cls, private_key) -> "KeyRing | None":
        """``private_key``: PEM bytes or text, the path of a PEM file (str
        or ``pathlib.Path``), a loaded ``cryptography`` private key, or a
        dict ``{key id: any of those}`` (the plugin's keyring); None: none."""
        if private_key is None:
            return None
        if isinstance(private_key, KeyRing):
            return private_key
        if isinstance(private_key, dict):
            ring = cls({str(k): _pem_of(v, f"private_key[{k!r}]")
                        for k, v in private_key.items()})
        else:
            ring = cls({None: _pem_of(private_key, "private_key")})
        for key_id in ring._pem:       # refused now, not at the first encrypted read
            ring._loaded[key_id] = _load_pem(ring._pem[key_id], "private_key")
        return ring

    def __len__(self) -> int:
        return len(self._pem)

    def ids(self) -> list:
        return sorted(map(str, self._pem))

    def get(self, key_id):
        """The key object for ``key_id`` (else the id-less key), or None."""
        name = key_id if key_id in self._pem else (None if None in self._pem else key_id)
        if name not in self._pem:
            return None
        if name not in self._loaded:
            self._loaded[name] = _load_pem(self._pem[name], "private_key")
        return self._loaded[name]

    def __eq__(self, other) -> bool:
        return isinstance(other, KeyRing) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __repr__(self) -> str:
        return f"KeyRing({len(self._pem)} key{'s' if len(self._pem) != 1 else ''}, " \
               f"sha256 {self._digest[:12]})"

    def __getstate__(self):
        return {"pem": self._pem}

    def __setstate__(self, state):
        self.__init__(state["pem"])


def _cryptography():
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise KbatchError("decrypting tiered storage needs cryptography, which is not "
                          "installed: pip install 'kbatch-kafka[remote]'") from None
    return serialization


def _pem_of(key, what: str) -> bytes:
    """PEM bytes of a key given as bytes, text, a path or a key object; the
    errors never carry key material (only what was given: its type and size)."""
    if hasattr(key, "private_bytes"):
        serialization = _cryptography()
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    if isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
        if b"-----BEGIN" not in data:
            raise ArgumentError(f"{what}: {len(data)} bytes that are not a PEM private key "
                                "(no -----BEGIN line; the value is not shown)")
        return data
    if isinstance(key, str) and "-----BEGIN" in key:
        return key.encode()
    if isinstance(key, (str, os.PathLike)):
        text = os.fspath(key)
        looks_like_path = isinstance(key, os.PathLike) or (
            "\n" not in text and len(text) <= 4096 and text.strip() == text and text)
        if not looks_like_path:
            raise ArgumentError(f"{what}: text of {len(text)} characters that is neither a "
                                "PEM private key (no -----BEGIN line) nor the path of a key "
                                "file (the value is not shown)")
        path = Path(text)
        try:
            if not path.is_file():
                raise ArgumentError(f"{what}: no PEM key file at the path given (text without "
                                    "a -----BEGIN line is read as a file name; the value is "
                                    "not shown)")
            if path.stat().st_size > MAX_KEY_FILE_BYTES:
                raise ArgumentError(f"{what}: the key file is larger than "
                                    f"{MAX_KEY_FILE_BYTES} bytes: not a PEM private key")
            data = path.read_bytes()
        except OSError as exc:
            raise ArgumentError(f"{what}: cannot read the key file ({exc.strerror or exc})") \
                from None
        if b"-----BEGIN" not in data:
            raise ArgumentError(f"{what}: the key file holds no PEM private key (no "
                                "-----BEGIN line)")
        return data
    raise ArgumentError(f"{what}: expected PEM bytes or text, a key file path or a "
                        f"cryptography private key, not {type(key).__name__}")


def _load_pem(pem: bytes, what: str):
    serialization = _cryptography()
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        kind = type(exc).__name__
        raise DecryptionError(f"{what}: not a PEM RSA private key that can be loaded ({kind}; "
                              "the key is not shown)") from None
    if not hasattr(key, "private_numbers") or not hasattr(key.private_numbers(), "p"):
        raise DecryptionError(f"{what}: not an RSA private key (the key is not shown)")
    return key


def _segment_states(metadata) -> tuple | None:
    """``((segment uuid, last state), ...)`` from ``remote_log_metadata``
    rows (a pyarrow table or list of dicts with ``segment_id`` and
    ``state``, in record order) or a mapping; None when not given."""
    if metadata is None:
        return None
    if isinstance(metadata, dict):
        return tuple(sorted((uuid_text(k), v) for k, v in metadata.items()))
    rows = metadata.to_pylist() if hasattr(metadata, "to_pylist") else list(metadata)
    states = {}
    for row in rows:
        if row.get("segment_id") is not None:
            states[uuid_text(row["segment_id"])] = row.get("state")
    return tuple(sorted(states.items()))


def _positive(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ArgumentError(f"{name} must be an int >= {low}, not {value!r}")
    return value


@dataclass(frozen=True)
class Storage:
    """Where bytes are and how to reach them (see the module docstring).
    Build it with ``Storage.of(...)`` or ``Storage.split(kwargs)``."""

    options: tuple = ()
    filesystem: object = None
    layout: str = "plain"
    keys: KeyRing | None = None
    block: int = DEFAULT_BLOCK
    concurrency: int = DEFAULT_CONCURRENCY
    retries: int = DEFAULT_RETRIES
    segment_states: tuple | None = field(default=None, repr=False)

    @classmethod
    def of(cls, storage=None, **kwargs) -> "Storage":
        """A ``Storage`` from keyword arguments (``STORAGE_KEYS``), or the
        ``storage`` given (a ``Storage``, or None: local files, defaults)."""
        if isinstance(storage, Storage):
            if kwargs:
                raise ArgumentError("give a Storage or storage keyword arguments, not both")
            return storage
        if storage is not None:
            raise ArgumentError(f"storage must be a kbatch Storage, not {type(storage).__name__}")
        unknown = sorted(k for k in kwargs if k not in STORAGE_KEYS)
        if unknown:
            raise ArgumentError(f"unknown storage argument(s) {', '.join(unknown)}; "
                                f"valid: {', '.join(STORAGE_KEYS)}")
        options = kwargs.get("storage_options") or {}
        if not isinstance(options, dict):
            raise ArgumentError(f"storage_options must be a dict, not {type(options).__name__}")
        filesystem = kwargs.get("filesystem")
        if filesystem is not None and options:
            raise ArgumentError("give storage_options or a filesystem object, not both")
        if filesystem is not None and not hasattr(filesystem, "ls"):
            raise ArgumentError("filesystem must be an fsspec filesystem object, not "
                                f"{type(filesystem).__name__}")
        layout = kwargs.get("layout") or "plain"
        if layout not in LAYOUTS:
            raise ArgumentError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
        return cls(options=tuple(sorted((str(k), _freeze(v)) for k, v in options.items())),
                   filesystem=filesystem, layout=layout,
                   keys=KeyRing.of(kwargs.get("private_key")),
                   block=_positive(kwargs.get("block", DEFAULT_BLOCK), "block", 1),
                   concurrency=_positive(kwargs.get("concurrency", DEFAULT_CONCURRENCY),
                                         "concurrency", 1),
                   retries=_positive(kwargs.get("retries", DEFAULT_RETRIES), "retries", 0),
                   segment_states=_segment_states(kwargs.get("remote_log_metadata")))

    @classmethod
    def split(cls, kwargs: dict, storage=None) -> tuple["Storage", dict]:
        """``(Storage, the other keys)``: the Storage of the storage keys in
        ``kwargs`` (or a ``Storage`` given as ``storage=``, there or here)."""
        kwargs = dict(kwargs)
        given = kwargs.pop("storage", None)
        if given is not None and storage is not None and given is not storage:
            raise ArgumentError("two storage arguments given")
        storage = given if given is not None else storage
        mine = {k: kwargs[k] for k in STORAGE_KEYS if k in kwargs}
        rest = {k: v for k, v in kwargs.items() if k not in STORAGE_KEYS}
        if storage is not None and mine:
            raise ArgumentError("give a Storage or storage keyword arguments, not both")
        return (cls.of(storage) if storage is not None else cls.of(**mine)), rest

    @property
    def storage_options(self) -> dict:
        """The fsspec storage options, as a fresh dict."""
        return {k: _thaw(v) for k, v in self.options}

    @property
    def states(self) -> dict | None:
        """``{segment uuid: last state}`` (tiered), None when not given."""
        return None if self.segment_states is None else dict(self.segment_states)

    def __hash__(self) -> int:
        fs = None if self.filesystem is None else id(self.filesystem)
        return hash((self.options, fs, self.layout, self.keys, self.block, self.concurrency,
                     self.retries, self.segment_states))

    def __eq__(self, other) -> bool:
        return (isinstance(other, Storage) and self.options == other.options
                and self.filesystem is other.filesystem and self.layout == other.layout
                and self.keys == other.keys and self.block == other.block
                and self.concurrency == other.concurrency and self.retries == other.retries
                and self.segment_states == other.segment_states)

    def __repr__(self) -> str:
        parts = []
        if self.options:
            parts.append("storage_options={" + ", ".join(
                f"{k!r}: {shown(k, _thaw(v))}" for k, v in self.options) + "}")
        if self.filesystem is not None:
            parts.append(f"filesystem={type(self.filesystem).__name__}")
        if self.layout != "plain":
            parts.append(f"layout={self.layout!r}")
        if self.keys is not None:
            parts.append(f"private_key={self.keys!r}")
        return "Storage(" + ", ".join(parts) + ")"


LOCAL = Storage()
