"""Reference reader of solewriter's published hook projection (``current.json``, format v2).

Standard library only. A hook binds the reader to its OWN attested identity (the seven-field
attested tuple); the reader derives the target id from it exactly as solewriter does
(``solewriter.target.v1`` canonical encoding, SHA-256, lowercase hex), builds the one path
``<runtime_root>/hook-projections/<target_id>/current.json`` itself (no path is ever taken from
a document), and returns the whole validated document or raises one typed error:

* bounded read: a file of more than ``MAX_DOCUMENT_BYTES`` (64 MiB) is refused
  (:class:`TooLarge`); at most one byte past the bound is read;
* no symlink is followed: ``hook-projections/``, the target directory and ``current.json`` are
  opened relative to their parent's file descriptor with ``O_NOFOLLOW`` (:class:`UnsafePath`);
* every field's shape is checked as solewriter's Rust parser checks it (see
  ``schema/current.v2.schema.json``): each channel's ``status`` and ``reason`` paired as the
  publisher pairs them and agreeing with ``publishedAt``, ``envelope`` null exactly for a
  ``corrupt-envelope`` channel, ``producerWatermarks`` and ``coverage`` equal to what the
  channels imply, no name both in ``channels`` and ``missing``; plus the order the publisher
  guarantees (:class:`InvalidDocument`). A document of another format (v1 included) is
  refused as invalid, naming the format expected;
* a document for another target is refused (:class:`ForeignDocument`);
* status is re-checked at the reader's clock (:func:`status_at`): a degraded or stale
  channel stays so, a fresh one is ``stale`` (reason ``expired``) once ``expiresAt <= now``;
  :func:`coverage_at` recounts the coverage at that clock.
"""

import errno
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass

FORMAT = "solewriter.hook-projection.v2"
MAX_DOCUMENT_BYTES = 64 << 20
PROJECTIONS_DIR = "hook-projections"
CURRENT_FILE = "current.json"
CANONICAL_PREFIX = b"solewriter.target.v1\n"
TUPLE_FIELDS = (
    "schemaVersion",
    "capability",
    "agentId",
    "harnessType",
    "instanceKeyDigest",
    "workspaceKeyDigest",
    "projectionKind",
)
MAX_FIELD_BYTES = 256
U64_MAX = (1 << 64) - 1

_TARGET_ID = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SHOWN_FORMAT = re.compile(r"[\x20-\x7e]{1,64}")
_TOP_KEYS = (
    "format",
    "targetId",
    "fencingEpoch",
    "publishedAt",
    "channels",
    "missing",
    "producerWatermarks",
    "coverage",
)
_CHANNEL_KEYS = (
    "channel",
    "producer",
    "sourceWatermark",
    "capturedAt",
    "expiresAt",
    "updatedAt",
    "status",
    "reason",
    "envelope",
)
COVERAGE_KEYS = ("registered", "fresh", "stale", "degraded", "missing", "unregistered")
STATUSES = ("fresh", "stale", "degraded")
#: The reasons each status is published with (``None`` is JSON null).
REASONS = {
    "fresh": (None,),
    "stale": ("expired",),
    "degraded": ("source-conflict", "corrupt-envelope"),
}
_CORRUPT_ENVELOPE = "corrupt-envelope"
_REASONS = REASONS["stale"] + REASONS["degraded"]
_READ_CHUNK = 1 << 20


class ReaderError(Exception):
    """Base of every error this module raises; ``code`` names the type, ``path`` the file."""

    code = "error"

    def __init__(self, message, path=None):
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self):
        return self.message if self.path is None else f"{self.path}: {self.message}"


class InvalidTuple(ReaderError):
    """The attested tuple is not exactly the seven fields, each a valid string."""

    code = "invalid-tuple"


class NotPublished(ReaderError):
    """No ``current.json`` for the target (nothing published yet)."""

    code = "absent"


class UnsafePath(ReaderError):
    """A symlink or a non-directory / non-regular file where the reader expects its path."""

    code = "unsafe-path"


class ReadFailed(ReaderError):
    """Any other OS error while opening or reading (``errno`` on ``__cause__``)."""

    code = "io"


class TooLarge(ReaderError):
    """The file holds more than ``MAX_DOCUMENT_BYTES`` bytes."""

    code = "too-large"


class InvalidDocument(ReaderError):
    """The bytes are not a complete, well-formed v2 projection document."""

    code = "invalid"


class ForeignDocument(ReaderError):
    """A well-formed document naming another target than the reader's own."""

    code = "foreign"


@dataclass(frozen=True)
class Reading:
    """One successful read: the document as published, and at the reader's clock
    ``read_at_ms`` each channel's status (:func:`status_at`) and the coverage
    (:func:`coverage_at`)."""

    target_id: str
    path: str
    document: dict
    read_at_ms: int
    status: dict
    coverage: dict


def canonical_bytes(attested_tuple):
    """The canonical encoding of the attested tuple (raises :class:`InvalidTuple`)."""
    if not isinstance(attested_tuple, dict):
        raise InvalidTuple("attested tuple is not an object")
    for key in attested_tuple:
        if key not in TUPLE_FIELDS:
            raise InvalidTuple(f"attested tuple has unknown field `{key}`")
    out = bytearray(CANONICAL_PREFIX)
    for field in TUPLE_FIELDS:
        if field not in attested_tuple:
            raise InvalidTuple(f"attested tuple is missing `{field}`")
        value = attested_tuple[field]
        if not isinstance(value, str):
            raise InvalidTuple(f"attested field `{field}` is not a string")
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidTuple(f"attested field `{field}` is not valid Unicode") from e
        if not encoded or len(encoded) > MAX_FIELD_BYTES:
            raise InvalidTuple(f"attested field `{field}` must be 1-{MAX_FIELD_BYTES} bytes")
        if any(_is_control(c) for c in value):
            raise InvalidTuple(f"attested field `{field}` contains a control character")
        out += f"{field}={len(encoded)}:".encode("ascii") + encoded + b"\n"
    return bytes(out)


def _is_control(char):
    """Rust's ``char::is_control``: the C0 and C1 control ranges."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def target_id(attested_tuple):
    """The target id: lowercase hex SHA-256 of :func:`canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(attested_tuple)).hexdigest()


def current_path(runtime_root, target):
    """``<runtime_root>/hook-projections/<target>/current.json`` for a valid target id."""
    if not isinstance(target, str) or not _TARGET_ID.fullmatch(target):
        raise InvalidTuple("target id must be 64 lowercase hex characters")
    return os.path.join(os.fspath(runtime_root), PROJECTIONS_DIR, target, CURRENT_FILE)


def _invalid(message):
    raise InvalidDocument(message)


def _pairs(pairs):
    """JSON object hook: a dict that remembers a duplicated key (checked where Rust does)."""
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        seen = set()
        obj.duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


class _Object(dict):
    """A parsed JSON object; ``duplicate`` is a key that appeared twice, if any."""

    duplicate = None


def _constant(name):
    _invalid(f"`{name}` is not JSON")


def _check_map(value, what):
    """An object of any keys, none written twice."""
    if not isinstance(value, dict):
        _invalid(f"{what} is not an object")
    if value.duplicate is not None:
        _invalid(f"{what} has the key `{value.duplicate}` twice")


def _check_object(value, what, keys):
    """An object of exactly ``keys``, none written twice."""
    _check_map(value, what)
    for key in value:
        if key not in keys:
            _invalid(f"{what} has the unknown key `{key}`")
    for key in keys:
        if key not in value:
            _invalid(f"{what} is missing `{key}`")


def _check_u64(value, what):
    if type(value) is not int or not 0 <= value <= U64_MAX:
        _invalid(f"{what} is not an integer in 0..2^64-1")


def _check_name(value, what):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        _invalid(f"{what} is not a name ([a-z0-9][a-z0-9._-]{{0,63}})")


def _check_ascending(names, what):
    for before, after in zip(names, names[1:]):
        if not before < after:
            _invalid(f"{what} are not in strictly ascending name order (`{after}`)")


def _shown(reason):
    return "null" if reason is None else reason


def _check_channel(channel, index, published_at):
    what = f"channels[{index}]"
    _check_object(channel, what, _CHANNEL_KEYS)
    _check_name(channel["channel"], f"{what}.channel")
    if channel["producer"] is not None:
        _check_name(channel["producer"], f"{what}.producer")
    for key in ("sourceWatermark", "capturedAt", "expiresAt", "updatedAt"):
        _check_u64(channel[key], f"{what}.{key}")
    status, reason = channel["status"], channel["reason"]
    if not isinstance(status, str) or status not in STATUSES:
        _invalid(f"{what}.status is not `fresh`, `stale` or `degraded`")
    if reason is not None and (not isinstance(reason, str) or reason not in _REASONS):
        _invalid(f"{what}.reason is not null, `expired`, `source-conflict` or `corrupt-envelope`")
    if reason not in REASONS[status]:
        _invalid(f"{what} has status `{status}` with reason `{_shown(reason)}`")
    if channel["envelope"] is None and reason != _CORRUPT_ENVELOPE:
        _invalid(f"{what}.envelope is null, but the reason is not `{_CORRUPT_ENVELOPE}`")
    if channel["envelope"] is not None and reason == _CORRUPT_ENVELOPE:
        _invalid(f"{what}.envelope is not null, but the reason is `{_CORRUPT_ENVELOPE}`")
    if channel["envelope"] is not None and not isinstance(channel["envelope"], dict):
        _invalid(f"{what}.envelope is not a JSON object")
    if status == "fresh" and channel["expiresAt"] <= published_at:
        _invalid(f"{what} is `fresh`, but expiresAt <= publishedAt")
    if status == "stale" and published_at < channel["expiresAt"]:
        _invalid(f"{what} is `stale`, but publishedAt < expiresAt")


def _check_producer_watermarks(doc):
    """``producerWatermarks``: exactly producer -> channel -> watermark of the channels whose
    producer is not null."""
    value = doc["producerWatermarks"]
    _check_map(value, "producerWatermarks")
    for producer, channels in value.items():
        _check_name(producer, f"producerWatermarks key `{producer}`")
        _check_map(channels, f"producerWatermarks.{producer}")
        for name, watermark in channels.items():
            _check_name(name, f"producerWatermarks.{producer} key `{name}`")
            _check_u64(watermark, f"producerWatermarks.{producer}.{name}")
    implied = {}
    for index, channel in enumerate(doc["channels"]):
        if channel["producer"] is not None:
            implied.setdefault(channel["producer"], {})[channel["channel"]] = index
    for producer, channels in value.items():
        if producer not in implied:
            _invalid(f"producerWatermarks has the producer `{producer}`, which owns no channel of channels")
        for name in channels:
            if name not in implied[producer]:
                _invalid(
                    f"producerWatermarks.{producer} has the channel `{name}`, "
                    f"which is not a channel of `{producer}` in channels"
                )
    for producer, channels in implied.items():
        if producer not in value:
            _invalid(f"producerWatermarks lacks the producer `{producer}`")
        for name, index in channels.items():
            if name not in value[producer]:
                _invalid(f"producerWatermarks.{producer} lacks the channel `{name}`")
            listed, stored = value[producer][name], doc["channels"][index]["sourceWatermark"]
            if listed != stored:
                _invalid(
                    f"producerWatermarks.{producer}.{name} is {listed}, "
                    f"but channels[{index}].sourceWatermark is {stored}"
                )


def _coverage(document, statuses):
    """The coverage of ``document`` for the channels' ``statuses`` (in channel order)."""
    stored = len(document["channels"])
    unregistered = sum(1 for c in document["channels"] if c["producer"] is None)
    return {
        "registered": stored - unregistered + len(document["missing"]),
        "fresh": statuses.count("fresh"),
        "stale": statuses.count("stale"),
        "degraded": statuses.count("degraded"),
        "missing": len(document["missing"]),
        "unregistered": unregistered,
    }


def _check_coverage(doc):
    value = doc["coverage"]
    _check_object(value, "coverage", COVERAGE_KEYS)
    for key in COVERAGE_KEYS:
        _check_u64(value[key], f"coverage.{key}")
    expected = _coverage(doc, [c["status"] for c in doc["channels"]])
    for key in COVERAGE_KEYS:
        if value[key] != expected[key]:
            _invalid(f"coverage.{key} is {value[key]}, expected {expected[key]}")


def parse_document(data, expected_target_id):
    """Validates the bytes of a ``current.json`` and returns the document (a dict).

    Raises :class:`TooLarge`, :class:`InvalidDocument` or :class:`ForeignDocument`.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise TooLarge(f"{len(data)} bytes or more exceeds the bound of {MAX_DOCUMENT_BYTES}")
    try:
        doc = json.loads(
            bytes(data).decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_constant
        )
    except (ValueError, RecursionError) as e:
        raise InvalidDocument(f"not JSON: {e}") from e
    if isinstance(doc, dict) and "format" in doc and doc["format"] != FORMAT:
        found = doc["format"]
        if isinstance(found, str) and _SHOWN_FORMAT.fullmatch(found):
            _invalid(f"format is `{found}`, expected `{FORMAT}`")
        _invalid(f"format is not `{FORMAT}`")
    _check_object(doc, "document", _TOP_KEYS)
    if not isinstance(doc["targetId"], str) or not _TARGET_ID.fullmatch(doc["targetId"]):
        _invalid("targetId is not 64 lowercase hex characters")
    _check_u64(doc["fencingEpoch"], "fencingEpoch")
    _check_u64(doc["publishedAt"], "publishedAt")
    if not isinstance(doc["channels"], list):
        _invalid("channels is not an array")
    for index, channel in enumerate(doc["channels"]):
        _check_channel(channel, index, doc["publishedAt"])
    names = [c["channel"] for c in doc["channels"]]
    _check_ascending(names, "channels")
    if not isinstance(doc["missing"], list):
        _invalid("missing is not an array")
    for index, name in enumerate(doc["missing"]):
        _check_name(name, f"missing[{index}]")
    _check_ascending(doc["missing"], "missing channels")
    stored = set(names)
    for name in doc["missing"]:
        if name in stored:
            _invalid(f"`{name}` is both in channels and in missing")
    _check_producer_watermarks(doc)
    _check_coverage(doc)
    if doc["targetId"] != expected_target_id:
        raise ForeignDocument(f"document names target {doc['targetId']}, expected {expected_target_id}")
    return doc


def _status_at(channel, now_ms):
    if channel["status"] == "fresh" and channel["expiresAt"] <= now_ms:
        return "stale", "expired"
    return channel["status"], channel["reason"]


def status_at(document, now_ms):
    """``{channel: {"status": ..., "reason": ...}}`` at ``now_ms`` for a validated document.

    A channel published ``degraded`` keeps its status and reason, one published ``stale``
    stays stale (it expired at publication), one published ``fresh`` is ``stale`` with reason
    ``expired`` once ``expiresAt <= now_ms``, else ``fresh`` with reason ``None``.
    """
    out = {}
    for c in document["channels"]:
        status, reason = _status_at(c, now_ms)
        out[c["channel"]] = {"status": status, "reason": reason}
    return out


def coverage_at(document, now_ms):
    """The document's ``coverage`` recounted at ``now_ms`` (same keys): ``fresh``, ``stale``
    and ``degraded`` by :func:`status_at`; ``registered``, ``missing`` and ``unregistered`` as
    published."""
    return _coverage(document, [_status_at(c, now_ms)[0] for c in document["channels"]])


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _open_at(name, flags, dir_fd, path):
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError as e:
        raise NotPublished("not published", path) from e
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise UnsafePath(f"a symlink or not a directory ({e.strerror})", path) from e
        raise ReadFailed(e.strerror, path) from e


def read_bytes(runtime_root, target):
    """The bytes of the target's ``current.json``: at most ``MAX_DOCUMENT_BYTES + 1``, opened
    without following a symlink at ``hook-projections/``, the target directory or the file."""
    path = current_path(runtime_root, target)
    fds = []
    try:
        fds.append(_open_at(os.fspath(runtime_root), os.O_RDONLY | os.O_DIRECTORY, None, path))
        for name in (PROJECTIONS_DIR, target):
            fds.append(_open_at(name, _NOFOLLOW_DIR, fds[-1], path))
        fds.append(_open_at(CURRENT_FILE, _NOFOLLOW_FILE, fds[-1], path))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise UnsafePath("not a regular file", path)
        chunks, size = [], 0
        while size <= MAX_DOCUMENT_BYTES:
            chunk = os.read(fds[-1], min(_READ_CHUNK, MAX_DOCUMENT_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise ReadFailed(e.strerror, path) from e
    finally:
        for fd in fds:
            os.close(fd)


def read_current(runtime_root, attested_tuple, now_ms=None):
    """Reads the document published for the reader's own attested identity.

    ``now_ms`` (Unix milliseconds) defaults to the reader's clock. Returns a :class:`Reading`;
    raises a :class:`ReaderError` subclass.
    """
    target = target_id(attested_tuple)
    path = current_path(runtime_root, target)
    data = read_bytes(runtime_root, target)
    try:
        document = parse_document(data, target)
    except ReaderError as e:
        e.path = path
        raise
    read_at = int(time.time() * 1000) if now_ms is None else now_ms
    return Reading(
        target, path, document, read_at, status_at(document, read_at), coverage_at(document, read_at)
    )
