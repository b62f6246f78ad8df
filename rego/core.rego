# gatekeeper.core: helpers of the built-in policy that operator Rego
# must not change. Rego merges every definition of a rule or function in a
# package, so a helper in package gatekeeper could be widened by an
# operator module defining the same name (an extra `_in_workspace(p) if
# true` allowed Read /etc/passwd). Operator modules may not declare this
# package, nor any other package under gatekeeper but gatekeeper and
# gatekeeper.constraints, nor rules named like the built-in ones: the
# sidecar refuses such a module when it loads (rego/operator.go).
package gatekeeper.core

# --- combining findings ------------------------------------------------------------

# A finding gatekeeper can read is exactly {"rule": <string>, "reason":
# <string>}, both non-empty. Any other finding in deny, ask or allow (a
# string, the usual OPA/conftest style, or an object missing a key or with
# more) would otherwise drop out unseen, taking the operator's rule with
# it: it denies instead, by rule gatekeeper.unreadable_finding. The test
# is written out in _entry, where every finding meets it: a function call
# costs OPA's evaluator more than the test itself.
readable(f) if _entry("allow", f)[3] == "allow"

# Each kind of finding as [rank, rule, reason, decision], sorted so the
# outcome is stable: by rule name, except that an unreadable ask or allow
# (rank 0) comes first and decides deny. Asks and allows are evaluated only
# when no deny (and no ask) decided, as before. gatekeeper.decision turns
# the first entry into {"decision": e[3], "rule": e[1], "reason": e[2]}.
denies := sort([_entry("deny", f) | some f in data.gatekeeper.deny])

asks := sort([_entry("ask", f) | some f in data.gatekeeper.ask])

allows := sort([_entry("allow", f) | some f in data.gatekeeper.allow])

_entry(kind, f) := [1, rule, reason, kind] if {
	{"rule": rule, "reason": reason} = f # exactly these two keys
	is_string(rule)
	is_string(reason)
	rule != ""
	reason != ""
} else := [0, "gatekeeper.unreadable_finding", _unreadable(kind, f), "deny"] if kind != "deny"
else := [1, "gatekeeper.unreadable_finding", _unreadable(kind, f), "deny"]

_unreadable(kind, f) := sprintf("the policy's %s set holds a finding gatekeeper cannot read (%s): a finding must be exactly {\"rule\": <non-empty string>, \"reason\": <non-empty string>}, so the call is denied", [kind, _short(f)])

# _short renders a finding for a reason, cut to 200 bytes.
_short(x) := s if {
	j := json.marshal(x)
	count(j) <= 200
	s := j
} else := concat("", [substring(json.marshal(x), 0, 200), "…"])

# --- host paths ---------------------------------------------------------------------

# in_workspace is true when path is the workspace root or beneath it; the
# root's prefix is computed once per decision. gatekeeper's
# host_fs.outside_workspace writes out its negation (a test pins the two).
in_workspace(path) if path == input.workspace_root

in_workspace(path) if startswith(path, workspace_prefix)

# workspace_prefix is the workspace root with one trailing "/".
workspace_prefix := concat("", [trim_suffix(input.workspace_root, "/"), "/"])

# shown names a path as the model wrote it, and where it really leads.
shown(p) := sprintf("%s (resolves to %s)", [p.raw, p.resolved]) if p.raw != p.resolved
else := p.raw
