# The program the Python tests run against the fake bridge: it uses the
# generated wrappers as a sandboxed program would and prints what it saw,
# as one JSON object, for the Go test to check.
import inspect
import json
import os
import sys
import threading
import typing

import gatekeeper_tools as gk
import gatekeeper_tools.records as records
import gatekeeper_tools.evil as evil
import gatekeeper_tools.class_ as class_
import gatekeeper_tools.call_ as call_
import gatekeeper_tools.json as json_server

out = {}
out["page"] = records.get_records(page=2, size=10)
out["page_defaults"] = records.get_records(page=1)
out["lookup"] = records.lookup(id="c-7")
# Files, not base64: each non-text item is written to a file.
media = records.lookup(id="media")
out["media"] = media
out["media_bytes"] = [open(i["path"], "rb").read().hex() if isinstance(i, dict) and i.get("type") == "file" else None
                      for i in media]
out["media_call_has_base64"] = "iVBORw0KGgo" in json.dumps(gk.call("records", "lookup", {"id": "media"}))
try:
    records.lookup(id="not-base64")
    out["not_base64"] = None
except gk.ToolCallError as e:
    out["not_base64"] = e.kind
out["count"] = records.count()
out["update"] = records.update(record={"id": "c-7", "fields": {"name": "Ada"}}, tags=["a", "b"], dry_run=False)
out["a_b"] = json.loads(evil.a_b(not_an_identifier="x", from_=1, _args_="y", _gk_="z", page_size=3, page_size_=4, x9lives="*/ x /*"))
out["dict"] = json.loads(evil.dict(str="s"))
out["class_"] = json.loads(evil.class_(x=1))
out["get_records"] = [json.loads(evil.get_records(x=1)), json.loads(evil.get_records_(x=2))]
out["any"] = json.loads(evil.Any_(free="form", n=1))
out["constructor"] = evil.constructor_()
out["then"] = json.loads(evil.then_())
out["modules"] = [json.loads(m.ping()) for m in (class_, call_, json_server)]
out["call_is_function"] = callable(gk.call)
# Typed results: the return annotation is the output schema's TypedDict,
# whose hints resolve; a hostile key takes TypedDict's functional form.
hints = typing.get_type_hints(records.get_records)
item = typing.get_type_hints(records.GetRecordsOutputRecordsItem, include_extras=True)
out["typed"] = {
    "return": hints["return"].__name__,
    "records": str(typing.get_type_hints(hints["return"])["records"]),
    "item": {k: str(v) for k, v in item.items()},
    "evil_keys_ok": [list(typing.get_type_hints(c)) for c in vars(evil).values()
                     if isinstance(c, type) and typing.is_typeddict(c)] == [[json.loads(os.environ["HOSTILE"])]],
}
out["dir_records"] = [n for n in dir(records) if not n.startswith("__")]
out["dir_package"] = [n for n in dir(gk) if not n.startswith("_") and not inspect.ismodule(getattr(gk, n))]
out["servers"] = gk.servers()

hostile = json.loads(os.environ["HOSTILE"]).replace("\r\n", "\n").strip()
out["doc_kept"] = hostile in evil.__doc__ and inspect.cleandoc(evil.a_b.__doc__).startswith(hostile + "\n")
out["required_is_required"] = False
try:
    evil.a_b(from_=1)
except TypeError:
    out["required_is_required"] = True
out["positional_refused"] = False
try:
    records.lookup("c-7")
except TypeError:
    out["positional_refused"] = True

errors = {}
for tool in ["x-denied", "x-limit", "x-timeout", "x-server", "x-cancelled", "x-bad-request", "x-novel", "x-tool-error"]:
    try:
        gk.call("records", tool, {})
        errors[tool] = None
    except gk.ToolCallError as e:
        errors[tool] = {"class": type(e).__name__, "kind": e.kind, "rule": e.rule, "message": e.message,
                        "is_denied": isinstance(e, gk.ToolCallDenied), "is_limit": isinstance(e, gk.ToolCallLimit),
                        "has_result": e.result is not None}
out["errors"] = errors

# Several threads, calls in flight at once on one connection: the bridge
# answers them only once all are there, in reverse order.
n = int(os.environ["BARRIER"])
results = [None] * n
def worker(i):
    results[i] = gk.call("records", "barrier", {"n": i})["structuredContent"]["n"]
threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["barrier"] = results

big = gk.call("records", "x-big", {})["content"][0]["text"]
out["big"] = len(big) if set(big) == {"\u00e9"} else -1

# The bridge going away fails the pending call, and the next call connects again.
try:
    gk.call("records", "x-close", {})
    out["closed"] = None
except gk.ToolCallError as e:
    out["closed"] = e.kind
out["after_close"] = records.lookup(id="again")

print(json.dumps(out))
