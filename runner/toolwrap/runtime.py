"""gatekeeper_tools: call the MCP tools this run may call, through gatekeeper.

Each server the policy lets this program call is a module of this package,
with one function per tool (keyword arguments, type hints and a docstring
from the tool's schema):

    import gatekeeper_tools.crm as crm
    customers = crm.find_customers(city="London", limit=100)

help(gatekeeper_tools.<server>) lists a server's tools; servers() lists the
servers. call(server, tool, arguments) calls a tool by its MCP name and
returns the whole MCP result (content, structuredContent, isError).

A function returns the tool's structured result (structuredContent) when
the tool declares an output schema. Otherwise it returns the tool's text
when its content is all text, and else a list of its content items in
order: text as a str, and a dict for each other item. No base64 reaches the
program: an image, audio or embedded resource (blob or text) is written to
a new file under /tmp/gatekeeper-results and stands as {"type": "file",
"kind": "image"|"audio"|"resource", "path", "mimeType", "size"} (a
resource's "uri" too); a resource_link stays {"type": "resource_link",
"uri", "name", "mimeType"?, ...}, which gatekeeper never fetches. call()'s
content holds the same items.

Every call is decided by gatekeeper's policy and written to its audit log.
A call that gets no result raises ToolCallError, or one of its subclasses,
with .kind, .rule (the policy rule or the bound that refused it, or "") and
.message. A tool that ran and reported an error (isError) raises
ToolCallError with kind "tool_error". A call blocks until its answer
comes; calls may be made from several threads at once (for instance with
concurrent.futures.ThreadPoolExecutor), each waiting only for its own
answer; past the number of calls in flight the policy allows, a call
waits its turn, in order, within its timeout.
"""

import base64 as _base64
import binascii as _binascii
import itertools as _itertools
try:
    import json as _json
except ImportError as _no_json:
    # The minimal image profile's python3-minimal has no json.
    raise ImportError(
        "gatekeeper_tools needs Python's json module, which this sandbox's "
        "Python lacks (the minimal image profile): run code that calls "
        "tools in the python image profile or one built on it"
    ) from _no_json
import os as _os
import socket as _socket
import threading as _threading

__all__ = [
    "call",
    "servers",
    "ToolCallError",
    "ToolCallDenied",
    "ToolCallLimit",
    "ToolCallTimeout",
    "ToolServerError",
    "ToolCallCancelled",
    "ToolCallBadRequest",
]

# _MANIFEST is generated: every server of this package, its module, what it
# is for and its tools (MCP name -> Python function name).
_MANIFEST = _json.loads("{}")


class ToolCallError(Exception):
    """A tool call that got no result, or a tool that reported an error.

    kind: why. From gatekeeper: "denied" (the policy refused the call),
    "limit" (a bound on this run's calls was hit), "timeout", "server" (the
    MCP server failed or is down), "cancelled" (the run is ending),
    "bad_request" (the request was malformed). From this package:
    "tool_error" (the tool ran and reported an error; .result holds its
    MCP result) and "bridge" (gatekeeper's bridge is not there or went
    away: this run may call no tools).
    rule: the policy rule or bound that refused the call, or "".
    message: what happened, in words.
    """

    def __init__(self, kind, rule, message, result=None):
        super().__init__(message)
        self.kind = kind
        self.rule = rule
        self.message = message
        self.result = result

    def __str__(self):
        if self.rule:
            return "%s (%s: %s)" % (self.message, self.kind, self.rule)
        return "%s (%s)" % (self.message, self.kind)


class ToolCallDenied(ToolCallError):
    """The policy refused the call; .rule names the rule."""


class ToolCallLimit(ToolCallError):
    """A bound on this run's calls was hit; .rule names the bound."""


class ToolCallTimeout(ToolCallError):
    """The call took longer than the policy allows."""


class ToolServerError(ToolCallError):
    """The MCP server failed, or is down."""


class ToolCallCancelled(ToolCallError):
    """The run is ending; the call's answer will not come."""


class ToolCallBadRequest(ToolCallError):
    """gatekeeper could not read the request."""


_KINDS = {
    "denied": ToolCallDenied,
    "limit": ToolCallLimit,
    "timeout": ToolCallTimeout,
    "server": ToolServerError,
    "cancelled": ToolCallCancelled,
    "bad_request": ToolCallBadRequest,
}


def _error(kind, rule, message, result=None):
    return _KINDS.get(kind, ToolCallError)(kind, rule, message, result)


class _Waiter:
    __slots__ = ("event", "answer")

    def __init__(self):
        self.event = _threading.Event()
        self.answer = None


class _Connection:
    """One connection to the bridge, shared by every thread of a process.

    Requests are written whole under a lock; one reader thread hands each
    answer to the waiter of its id. If the connection breaks, or the bridge
    sends a line that is not an answer, every pending call fails with kind
    "bridge" and the next call connects again.
    """

    def __init__(self, path):
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.connect(path)
        self.pid = _os.getpid()
        self.write_lock = _threading.Lock()
        self.lock = _threading.Lock()
        self.pending = {}
        self.closed = None
        reader = _threading.Thread(target=self._read, name="gatekeeper_tools", daemon=True)
        reader.start()

    def _read(self):
        reason = "gatekeeper's bridge closed the connection"
        try:
            for line in self.sock.makefile("rb"):
                try:
                    answer = _json.loads(line)
                    waiter = None
                    with self.lock:
                        waiter = self.pending.pop(answer["id"], None)
                except (ValueError, KeyError, TypeError):
                    reason = "gatekeeper's bridge sent a line that is not an answer"
                    break
                if waiter is not None:
                    waiter.answer = answer
                    waiter.event.set()
        except OSError as e:
            reason = "the connection to gatekeeper's bridge failed: %s" % e
        self._close(reason)

    def _close(self, reason):
        with self.lock:
            if self.closed is None:
                self.closed = reason
            pending, self.pending = self.pending, {}
        try:
            self.sock.close()
        except OSError:
            pass
        for waiter in pending.values():
            waiter.event.set()

    def send(self, id, line):
        waiter = _Waiter()
        with self.lock:
            if self.closed is not None:
                return None
            self.pending[id] = waiter
        try:
            with self.write_lock:
                self.sock.sendall(line)
        except OSError as e:
            self._close("the connection to gatekeeper's bridge failed: %s" % e)
        return waiter


_ids = _itertools.count(1)
_lock = _threading.Lock()
_conn = None


def _connection():
    global _conn
    with _lock:
        c = _conn
        if c is None or c.closed is not None or c.pid != _os.getpid():
            root = _os.environ.get("GATEKEEPER_TOOLS", "")
            path = _os.path.join(root, "bridge.sock") if root else ""
            if not path or not _os.path.exists(path):
                raise ToolCallError(
                    "bridge", "", "no tools can be called from this run (gatekeeper's bridge is not there)")
            try:
                c = _Connection(path)
            except OSError as e:
                raise ToolCallError("bridge", "", "cannot reach gatekeeper's bridge: %s" % e) from None
            _conn = c
        return c


# _RESULTS is where an image, audio or embedded resource of a result is
# written, one file each, so that no base64 reaches the program's values.
_RESULTS = _os.environ.get("GATEKEEPER_RESULTS") or "/tmp/gatekeeper-results"

# _EXTENSIONS names a file by its MIME type; any other type is .bin. The
# server's names and URIs never name a file.
_EXTENSIONS = {
    "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
    "image/svg+xml": ".svg", "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg", "application/pdf": ".pdf", "application/json": ".json",
    "text/plain": ".txt", "text/csv": ".csv", "text/html": ".html", "text/markdown": ".md",
    "application/zip": ".zip", "application/gzip": ".gz",
}
_files = _itertools.count(1)


def _save(data, mime):
    """Write data (bytes) to a new file under _RESULTS and return its path."""
    _os.makedirs(_RESULTS, mode=0o700, exist_ok=True)
    ext = _EXTENSIONS.get(mime.split(";")[0].strip().lower(), ".bin")
    path = _os.path.join(_RESULTS, "%d-%d%s" % (_os.getpid(), next(_files), ext))
    fd = _os.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL, 0o600)
    with _os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _decode(b64, what):
    try:
        return _base64.b64decode(b64, validate=True)
    except (_binascii.Error, ValueError, TypeError):
        raise ToolCallError("server", "", "the tool's %s is not base64" % what) from None


def _file(item):
    """The file that stands for an image, audio or embedded resource item:
    written under _RESULTS, and described by a small dict."""
    kind = item.get("type")
    if kind == "resource":
        res = item.get("resource") if isinstance(item.get("resource"), dict) else {}
        mime = str(res.get("mimeType") or "")
        if isinstance(res.get("blob"), str):
            data = _decode(res["blob"], "embedded resource")
            mime = mime or "application/octet-stream"
        else:
            data = str(res.get("text") or "").encode("utf-8")
            mime = mime or "text/plain"
        out = {"type": "file", "kind": "resource", "uri": str(res.get("uri") or "")}
    else:
        mime = str(item.get("mimeType") or "application/octet-stream")
        data = _decode(item.get("data"), kind)
        out = {"type": "file", "kind": kind}
    out.update({"path": _save(data, mime), "mimeType": mime, "size": len(data)})
    return out


def _files_of(result):
    """Replace each image, audio and embedded resource item of result's
    content by the file it is written to; a resource_link stays as it is,
    never fetched."""
    content = result.get("content")
    if not isinstance(content, list):
        return result
    items = []
    for item in content:
        if isinstance(item, dict) and item.get("type") in ("image", "audio", "resource"):
            item = _file(item)
        items.append(item)
    result["content"] = items
    return result


def _text(result):
    parts = []
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
    return "\n".join(parts)


def _content(result):
    """What a tool without an output schema returns: its text when its
    content is all text, else a list of its items in order (text as str,
    files and links as dicts)."""
    content = [i for i in (result.get("content") or []) if isinstance(i, dict)]
    if all(i.get("type") == "text" for i in content):
        return _text(result)
    return [i["text"] if i.get("type") == "text" and isinstance(i.get("text"), str) else i for i in content]


def call(server, tool, arguments=None):
    """Call tool of server with arguments (a dict) and return its MCP result.

    The result is a dict: "content" (a list of text, file and resource_link
    items: each image, audio or embedded resource is written to a file, see
    the package's docs), "structuredContent" when the tool returns
    structured data. Raises
    ToolCallError (or a subclass) when the call gets no result, and with kind
    "tool_error" when the tool reports an error (isError).
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict, not %s" % type(arguments).__name__)
    id = next(_ids)
    line = _json.dumps(
        {"id": id, "server": server, "tool": tool, "arguments": arguments},
        ensure_ascii=False, allow_nan=False, separators=(",", ":"),
    ).encode("utf-8") + b"\n"
    c = _connection()
    waiter = c.send(id, line)
    if waiter is not None:
        waiter.event.wait()
    answer = waiter.answer if waiter is not None else None
    if answer is None:
        raise ToolCallError("bridge", "", c.closed or "gatekeeper's bridge went away")
    if answer.get("ok") is not True:
        err = answer.get("error")
        if not isinstance(err, dict):
            err = {}
        raise _error(str(err.get("kind") or "bridge"), str(err.get("rule") or ""),
                     str(err.get("message") or "the call failed"))
    result = answer.get("result")
    if not isinstance(result, dict):
        raise ToolCallError("bridge", "", "gatekeeper's bridge sent an answer with no result")
    _files_of(result)
    if result.get("isError"):
        raise ToolCallError("tool_error", "", _text(result) or "the tool reported an error", result)
    return result


def _invoke(server, tool, arguments, structured):
    result = call(server, tool, arguments)
    if not structured:
        return _content(result)
    if "structuredContent" in result:
        return result["structuredContent"]
    try:
        return _json.loads(_text(result))
    except ValueError:
        raise ToolCallError(
            "tool_error", "", "the tool declares an output schema but returned no structured content", result) from None


def servers():
    """Return the servers this program may call: name -> {"module",
    "description", "tools"} where tools maps each MCP tool name to its
    function in the module."""
    return _json.loads(_json.dumps(_MANIFEST))
