"""Where a store is: a local folder (a :class:`~pathlib.Path`) or an object on S3-compatible storage (an
:class:`S3Path`). The engine reads the name (:func:`store_path`), so a scheme cubeslab does not support is
refused, never taken for a folder named ``gs:``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from . import _engine
from .errors import CubeslabError, InvalidInputError, StoreNotFoundError


class S3Path:
    """``s3://bucket/key``, joined with ``/`` as a :class:`~pathlib.Path` is, carrying the connection's
    ``storage_options`` (fsspec's names: ``key``, ``secret``, ``endpoint_url``, ``region``; the ``AWS_*``
    environment variables otherwise)."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url.rstrip("/")
        self.storage_options = {str(k): str(v) for k, v in (storage_options or {}).items()}

    def __truediv__(self, name: str | os.PathLike) -> S3Path:
        return S3Path(f"{self.url}/{os.fspath(name).strip('/')}", self.storage_options)

    def __fspath__(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"S3Path({self.url!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, S3Path) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def parent(self) -> S3Path:
        return S3Path(self.url.rsplit("/", 1)[0], self.storage_options)

    def is_file(self) -> bool:
        """Whether this node document (``.../zarr.json``) exists; nothing else is asked of a store."""
        if self.name != "zarr.json":
            raise InvalidInputError(f"{self.url}: only a node's zarr.json is looked up on object storage")
        try:
            _engine.read_node(self.parent.url, self.storage_options)
        except StoreNotFoundError:
            return False
        return True


def store_path(path: str | os.PathLike, storage_options: dict | None = None) -> Path | S3Path:
    """The store named ``path``: a :class:`~pathlib.Path`, or an :class:`S3Path` for ``s3://`` (with
    ``storage_options``)."""
    if isinstance(path, S3Path):
        return path if storage_options is None else S3Path(path.url, storage_options)
    text = os.fspath(path)
    kind, name = _engine.location(text)
    if kind == "s3":
        return S3Path(name, storage_options)
    if isinstance(text, str) and text[:3].lower() == "s3:":
        # A mistyped scheme would otherwise become a folder named s3: beside the work.
        raise InvalidInputError(
            f"{_without_userinfo(text)}: an S3 URL begins s3:// (two slashes), then the bucket: s3://bucket/key"
        )
    if storage_options:
        raise InvalidInputError(f"{path}: storage_options= is for object storage (s3://bucket/key)")
    return Path(name)


def _without_userinfo(text: str) -> str:
    """``text`` without credentials written before an ``@`` in its bucket's place."""
    head, _, rest = text.partition(":")
    host, slash, tail = rest.lstrip("/").partition("/")
    return f"{head}:{rest[: len(rest) - len(rest.lstrip('/'))]}{host.rpartition('@')[2]}{slash}{tail}"


def is_remote(path: str | os.PathLike) -> bool:
    """Whether ``path`` names an object on object storage (refusing a scheme cubeslab does not support)."""
    return isinstance(store_path(path), S3Path)


def storage_options_of(path) -> dict | None:
    """The connection options an :class:`S3Path` carries (None for anything else)."""
    return path.storage_options if isinstance(path, S3Path) else None


@contextmanager
def publishing(store, overwrite: bool) -> Iterator[_engine.Publication]:
    """A new store for ``store`` (a path, URL or :class:`S3Path`), written in a staging folder and
    published when complete (``commit``); one there is replaced only with ``overwrite``. If the block
    fails before the commit, the staging folder goes: these writers cannot resume, so no partial store is
    left to look at or to clear by hand."""
    publication = _engine.Publication(os.fspath(store), overwrite, storage_options_of(store))
    staging = publication.staging
    try:
        yield publication
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # gone already if the store was published
        raise


@dataclass(frozen=True)
class FetchedSource:
    """A source file on object storage, and the local copy an ingest reads."""

    url: str
    path: str
    version: str
    """The object's version as the server tells it (its ETag, else its time and size)."""

    def renamed(self, text: str) -> str:
        """``text`` naming the objects where it named their local copies (an imzML's ``.ibd`` too)."""
        return text.replace(os.path.dirname(self.path) + os.sep, self.url.rsplit("/", 1)[0] + "/")


_FETCHED: ContextVar[FetchedSource | None] = ContextVar("cubeslab_fetched_source", default=None)


@contextmanager
def named_by_url(fetched: FetchedSource) -> Iterator[None]:
    """While an ingest reads ``fetched``'s local copy: the store records the URL as its source
    (:func:`recorded_source`), and errors and warnings (:func:`naming_sources`) name the URL, not a
    temporary path."""
    token = _FETCHED.set(fetched)
    try:
        yield
    except CubeslabError as error:
        raise type(error)(fetched.renamed(str(error))) from None
    finally:
        _FETCHED.reset(token)


def naming_sources(text: str) -> str:
    """``text`` (a message) naming the URL of a downloaded source where it names its local copy."""
    fetched = _FETCHED.get()
    return text if fetched is None else fetched.renamed(text)


def source_origin(path: str | os.PathLike) -> FetchedSource | None:
    """The object ``path`` was downloaded from, while an ingest reads it (see :func:`named_by_url`)."""
    fetched = _FETCHED.get()
    return fetched if fetched is not None and os.fspath(path) == fetched.path else None


def recorded_source(path: str | os.PathLike) -> str:
    """How a store records its source: the URL a downloaded copy came from, else the path."""
    fetched = source_origin(path)
    return fetched.url if fetched is not None else os.fspath(path)


def local_only(path: str | os.PathLike, operation: str) -> Path:
    """``path`` as a local store; a store on object storage is refused for an ``operation`` that works on
    this machine only."""
    where = store_path(path)
    if isinstance(where, S3Path):
        raise InvalidInputError(
            f"{path}: {operation} works on stores on this machine, not yet on object storage"
        )
    return where


def store_size(path: Path | S3Path) -> int:
    """Bytes of every file (or object) under a store or array."""
    if isinstance(path, S3Path):
        return _engine.stored_bytes(path.url, path.storage_options)
    lock = _engine.store_lock_file()
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != lock)
