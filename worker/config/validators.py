"""The validators the environment reader applies: each turns one raw value into a setting or
raises ``ValueError`` saying why (``Env.parse`` adds the variable's name)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlsplit

import worker.config.values as defaults
from worker.config.env import Env
from worker.config.values import (
    SEARCH_ENGINES,
    SEARCH_MODEL_ALLOW_LIST,
    ArchiveBucket,
    ArchiveDirectory,
    ArchiveTarget,
    RenderMode,
    SearchProvider,
    UserUrls,
)
from worker.guardian.domains import parse_domain_list
from worker.guardian.policy import AddressPolicy
from worker.state.redis_conn import RedisTarget, parse_redis_url


def parse_domains(raw: str) -> frozenset[str]:
    return parse_domain_list(raw)


def ocr_languages(raw: str) -> str:
    """Tesseract's language codes ("eng", "chi_sim"), "+"-joined, at most eight: a model's file name."""
    codes = [code.strip() for code in raw.strip().replace(",", "+").split("+")]
    if not 0 < len(codes) <= 8 or not all(re.fullmatch(r"[a-z]{3}(_[a-z]{2,8})?", c) for c in codes):
        raise ValueError("must be Tesseract language codes joined by +, such as eng or eng+deu")
    return "+".join(codes)


def parse_cidrs(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=True))
        except ValueError as exc:
            raise ValueError(f"{part!r} is not a CIDR range ({exc})") from None
    AddressPolicy(networks)  # refuses a range inside a translation prefix, saying why
    return tuple(networks)


# An S3 bucket name (the rules for new buckets); a prefix of printable path segments, none of
# them "." or "..", so a prefix cannot climb out of itself on a service that resolves dot segments.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def archive_target(raw: str) -> ArchiveTarget | None:
    if raw.lower() == "off":
        return None
    if raw.lower().startswith("s3://"):
        bucket, _, prefix = raw[5:].partition("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise ValueError(f"{bucket!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
        segments = [part for part in prefix.split("/") if part]
        if len(prefix) > 512 or any(
            part in (".", "..") or not part.isprintable() or "\\" in part for part in segments
        ):
            raise ValueError("the prefix after the bucket must be printable path segments, none '.' or '..'")
        return ArchiveBucket(bucket, "".join(f"{part}/" for part in segments))
    if "\0" in raw or "://" in raw:
        raise ValueError(f"{raw!r} must be 'off', a directory, or s3://bucket/prefix")
    return ArchiveDirectory(str(Path(raw).absolute()))  # a "~" is the shell's to expand


def provider(raw: str) -> SearchProvider:
    try:
        return SearchProvider(raw.lower())
    except ValueError:
        known = ", ".join(p.value for p in SearchProvider)
        raise ValueError(f"{raw!r} is not a search provider ({known})") from None


def render_mode(raw: str) -> RenderMode:
    try:
        return RenderMode(raw.lower())
    except ValueError:
        raise ValueError(f"{raw!r} must be off, on or auto") from None


def user_urls(raw: str) -> UserUrls:
    try:
        return UserUrls(raw.lower())
    except ValueError:
        raise ValueError(f"{raw!r} must be ask, allow or never") from None


def daily_cap(raw: str) -> int:
    """A per-organization daily cap: a whole number from 1 (unset means no limit)."""
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None
    if not 1 <= value <= defaults.MAX_COUNT:
        raise ValueError(f"{raw!r} must be 1..{defaults.MAX_COUNT} (unset it for no limit)")
    return value


def engine(raw: str) -> str:
    if raw.lower() not in SEARCH_ENGINES:
        raise ValueError(f"{raw!r} is not a search engine ({', '.join(sorted(SEARCH_ENGINES))})")
    return raw.lower()


def origins(raw: str) -> tuple[str, ...]:
    """Web origins (``scheme://host[:port]``) allowed to call the MCP server, in the form browsers send."""
    origins = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        parts = urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(
                f"{item!r} is not an origin such as https://app.example.org or http://localhost:3000"
            )
        if parts.query or parts.fragment or parts.username is not None:
            raise ValueError(f"{item!r} is not an origin: no path, query or credentials")
        parts.port  # noqa: B018 - a port that is not a number raises ValueError here
        origins.append(f"{parts.scheme}://{parts.netloc.lower()}")
    return tuple(origins)


def port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise ValueError(f"{raw!r} is not a port in 1..65535")
    return value


def user_password(raw: str) -> tuple[str, defaults.Secret]:
    user, sep, password = raw.partition(":")
    if not sep or not user or not password:
        raise ValueError("must be 'user:password' with both parts non-empty")
    return user, defaults.Secret(password)


def http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        # A value with an "@" may hold a password where no URL parser finds it: not shown at all.
        shown = "the value" if "@" in raw else repr(raw)
        raise ValueError(f"{shown} is not an http(s) URL")
    return raw.rstrip("/")


def allowed_model(raw: str) -> str:
    if raw not in SEARCH_MODEL_ALLOW_LIST:
        allowed = ", ".join(sorted(SEARCH_MODEL_ALLOW_LIST))
        raise ValueError(f"{raw!r} is not on the allow-list of cheap search models ({allowed})")
    return raw


def header_value(raw: str) -> str:
    if any(not ch.isprintable() for ch in raw):
        raise ValueError("must be printable text")
    return raw


def log_level(raw: str) -> str:
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError(f"{raw!r} is not one of DEBUG, INFO, WARNING, ERROR")
    return level


def redis_url(raw: str) -> str:
    """A Redis URL the connection can use: a bad one stops start-up, not the first connection."""
    parse_redis_url(raw)
    return raw


def redis_target(url: str | None) -> RedisTarget:
    try:
        return parse_redis_url(url or defaults.DEFAULT_REDIS_URL)
    except ValueError as exc:  # settings built in code (the client's arguments) skip read()
        raise defaults.ConfigError(f"REDIS_URL: {exc}") from None


def otel_traces_endpoint(e: Env) -> str | None:
    """The OTLP/HTTP traces URL the OpenTelemetry specification's variables name, or None when they
    turn tracing off: ``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER`` without ``otlp``, or no
    endpoint. ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as written; the general
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` gets ``/v1/traces`` appended, as the specification says."""
    if (e.text("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return None
    exporters = (e.text("OTEL_TRACES_EXPORTER") or "otlp").replace(" ", "").lower().split(",")
    if "otlp" not in exporters:
        return None
    traces = e.parse("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None, http_url)
    if traces:
        return traces
    base = e.parse("OTEL_EXPORTER_OTLP_ENDPOINT", None, http_url)
    return base.rstrip("/") + "/v1/traces" if base else None
