"""Key names and URL helpers of `RedisStorage` (the layout is documented, with TTLs and writers,
in docs/reference/redis-keys.md).

Every key starts with the namespace. Every key of one run carries the run id as a Redis Cluster
hash tag, `{<run id>}`, so the keys of one run share a slot and one Lua script can write them
all. Global keys (indexes, correlation ids, idempotency keys) live in other slots and are never
touched by a run script.
"""

from __future__ import annotations

import hashlib
from urllib.parse import unquote, urlsplit

from reactorflow.errors import ConfigurationError

# Order of the KEYS every run script receives (see the header of each script).
RUN, STEPS, HIST, CTL, CLAIMS, CTR, TOK, LOCK = range(8)
RUN_PARTS = ("run", "steps", "hist", "ctl", "claims", "ctr", "tok", "lock")
# The head fields, in the order `load_head` reads them.
HEAD_FIELDS = ("reactor", "status", "meta", "state", "created", "touched")


class RedisKeys:
    """Builds every key and channel name of one namespace."""

    __slots__ = ("_run_sizes", "_run_template", "ns")

    def __init__(self, namespace: str) -> None:
        if not namespace or "{" in namespace or "}" in namespace:
            raise ConfigurationError(
                f"RedisStorage(namespace={namespace!r}): use a non-empty name without braces "
                "(braces would change the Redis Cluster hash tag of every key)",
                option="namespace",
            )
        self.ns = namespace
        # `packed_run_keys`: each key's RESP bulk string with the run id left out, and the size
        # of each key without the run id
        parts = [f"{namespace}:{part}:".encode(errors="surrogatepass") for part in RUN_PARTS]
        self._run_template = b"".join(b"$%d\r\n" + part.replace(b"%", b"%%") + b"{%b}\r\n"
                                      for part in parts)
        self._run_sizes = tuple(len(part) + 2 for part in parts)

    # -- one run (all in the run's slot) -------------------------------------------------------

    def run_keys(self, run_id: str) -> list[str]:
        """The keys of one run in the order every run script expects (RUN .. LOCK)."""
        tag = f"{{{run_id}}}"
        ns = self.ns
        return [f"{ns}:run:{tag}", f"{ns}:steps:{tag}", f"{ns}:hist:{tag}", f"{ns}:ctl:{tag}",
                f"{ns}:claims:{tag}", f"{ns}:ctr:{tag}", f"{ns}:tok:{tag}", f"{ns}:lock:{tag}"]

    def packed_run_keys(self, run_id: str) -> bytes:
        """`run_keys(run_id)` as the RESP bulk strings a command carries (what hiredis packs for
        them, a run id that is no valid UTF-8 encoded as redis-py's encoder does), in one
        formatting."""
        tag = run_id.encode(errors="surrogatepass")
        n = len(tag)
        s = self._run_sizes
        return self._run_template % (s[0] + n, tag, s[1] + n, tag, s[2] + n, tag, s[3] + n, tag,
                                     s[4] + n, tag, s[5] + n, tag, s[6] + n, tag, s[7] + n, tag)

    def run(self, run_id: str) -> str:
        return f"{self.ns}:run:{{{run_id}}}"

    def steps(self, run_id: str) -> str:
        return f"{self.ns}:steps:{{{run_id}}}"

    def hist(self, run_id: str) -> str:
        return f"{self.ns}:hist:{{{run_id}}}"

    def claims(self, run_id: str) -> str:
        return f"{self.ns}:claims:{{{run_id}}}"

    def elements(self, run_id: str, key: str) -> str:
        """The element slots of map step `key`: a hash, field = element index."""
        return f"{self.ns}:map:{{{run_id}}}:{key}"

    def lock(self, lock_id: str) -> str:
        """A run's liveness lock, or the lock of an async unit (`<run id>:<step key>`)."""
        return f"{self.ns}:lock:{{{lock_id}}}"

    def channel(self, run_id: str, topic: str = "") -> str:
        """The run's completion channel (topic "") or one unit's result channel."""
        base = f"{self.ns}:done:{{{run_id}}}"
        return f"{base}:{topic}" if topic else base

    # -- global keys ---------------------------------------------------------------------------

    def reactors(self) -> str:
        """Set of every reactor name that has created a run."""
        return f"{self.ns}:reactors"

    def by_reactor(self, reactor: str) -> str:
        """Sorted set of a reactor's runs (score = created_at)."""
        return f"{self.ns}:idx:all:{reactor}"

    def by_status(self, reactor: str, status: str) -> str:
        """Sorted set of a reactor's runs believed to be in `status` (score = created_at)."""
        return f"{self.ns}:idx:st:{status}:{reactor}"

    def units(self) -> str:
        """Sorted set of dispatched async units not yet reported ("<run id>|<key>",
        score = dispatch time)."""
        return f"{self.ns}:idx:units"

    def correlation(self, reactor: str, correlation_id: str) -> str:
        """A reactor's correlation id (hashed like an idempotency key: any text is safe)."""
        digest = hashlib.sha256(correlation_id.encode()).hexdigest()
        return f"{self.ns}:corr:{reactor}:{digest}"

    def past_correlation(self, reactor: str, correlation_id: str) -> str:
        """The ended run a reactor's correlation id led to (`remember_correlation`)."""
        digest = hashlib.sha256(correlation_id.encode()).hexdigest()
        return f"{self.ns}:corr-past:{reactor}:{digest}"

    def idempotency(self, reactor: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return f"{self.ns}:idem:{reactor}:{digest}"


URL_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "unix+cluster")
"""The schemes a Redis URL may have (a TCP server, over TLS, a unix socket; a cluster:
`unix+cluster` passes here to be refused with its reason, a cluster is reached over TCP)."""


def scheme_problem(url: str) -> str | None:
    """Why `url` cannot name a Redis by its scheme (what to write instead), or None."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return (f"it needs a scheme: redis://{safe_url(url).removeprefix('//')} (or rediss:// "
                "for TLS, unix:///path/to/redis.sock for a socket, redis+cluster:// for a "
                "cluster)")
    if scheme.lower() not in URL_SCHEMES:
        return (f"its scheme {scheme}:// is none of redis://, rediss:// (TLS), unix:// (a "
                f"socket), redis+cluster://: e.g. redis://{safe_url(url).partition('://')[2]}")
    return None


def safe_url(url: str) -> str:
    """`url` without user, password or query string (which may carry a password). Text with no
    `scheme://` is no URL: it is shown as typed (anything before an `@` masked)."""
    if "://" not in url:
        user, at, host = url.rpartition("@")
        return f"***@{host}" if at and user else url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparsable Redis URL>"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def url_secrets(url: str) -> list[str]:
    """The passwords a URL carries (to scrub them from any message that might echo them)."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except ValueError:
        return []
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if name == "password":
            found.append(value)
    return [variant for secret in found if secret for variant in {secret, unquote(secret)}]
