# gatekeeper.constraints: what a per-query override may change.
#
# Evaluated once when a query opens with a sandbox_policy override, over
#   input.base      the operator's sandbox section
#   input.merged    the override merged over it
#   input.ceilings  the operator's ceilings
#   input.net_allow_within_ceilings
#                   the entries of input.merged.net.allow that lie within a
#                   ceilings.net_hosts pattern, computed by the sidecar with
#                   the egress proxy's own pattern functions (nethost Covers)
# Sizes are bytes, durations milliseconds. Every violation is a sentence;
# any violation refuses the whole override, nothing is clamped. Operators
# may add `violations contains msg if ...` rules in their --rego-dir.
package gatekeeper.constraints

_limits := [
	{"path": "sandbox.proc.cpus", "value": input.merged.proc.cpus, "ceiling": input.ceilings.cpus, "unit": "cpus"},
	{"path": "sandbox.proc.memory", "value": input.merged.proc.memory, "ceiling": input.ceilings.memory, "unit": "bytes"},
	{"path": "sandbox.proc.pids", "value": input.merged.proc.pids, "ceiling": input.ceilings.pids, "unit": "count"},
	{"path": "sandbox.proc.timeout", "value": input.merged.proc.timeout, "ceiling": input.ceilings.timeout, "unit": "ms"},
	{"path": "sandbox.fs.workspace.size", "value": input.merged.fs.workspace.size, "ceiling": input.ceilings.tmpfs, "unit": "bytes"},
	{"path": "sandbox.fs.tmp.size", "value": input.merged.fs.tmp.size, "ceiling": input.ceilings.tmpfs, "unit": "bytes"},
	{"path": "sandbox.output.max_bytes", "value": input.merged.output.max_bytes, "ceiling": input.ceilings.output_bytes, "unit": "bytes"},
	{"path": "sandbox.output.max_files", "value": input.merged.output.max_files, "ceiling": input.ceilings.output_files, "unit": "count"},
	{"path": "sandbox.output.max_files_bytes", "value": input.merged.output.max_files_bytes, "ceiling": input.ceilings.output_files_bytes, "unit": "bytes"},
	{"path": "sandbox.session.idle_timeout", "value": input.merged.session.idle_timeout, "ceiling": input.ceilings.session.idle_timeout, "unit": "ms"},
	{"path": "sandbox.session.max_lifetime", "value": input.merged.session.max_lifetime, "ceiling": input.ceilings.session.max_lifetime, "unit": "ms"},
]

violations contains msg if {
	some l in _limits
	l.value > l.ceiling
	msg := sprintf("%s %s exceeds ceiling %s", [l.path, fmt(l.value, l.unit), fmt(l.ceiling, l.unit)])
}

violations contains "sandbox.proc.user 0 (root) is never allowed" if input.merged.proc.user == 0

violations contains msg if {
	not input.merged.proc.runtime in {r | some r in input.ceilings.runtimes}
	input.merged.proc.runtime != input.base.proc.runtime
	msg := sprintf("sandbox.proc.runtime %q is not in ceilings.runtimes", [input.merged.proc.runtime])
}

# An override may keep the base image or choose one of ceilings.images
# (profile names or image references, compared as written; the sidecar
# writes an empty image as the default profile's name before this runs).
violations contains msg if {
	input.merged.fs.image != input.base.fs.image
	not input.merged.fs.image in {i | some i in input.ceilings.images}
	choices := concat(", ", sort({input.base.fs.image} | {i | some i in input.ceilings.images}))
	msg := sprintf("sandbox.fs.image %q is not in ceilings.images (an override may choose: %s)", [input.merged.fs.image, choices])
}

# An override never adds or changes a mount.
violations contains msg if {
	input.merged.fs.deps != input.base.fs.deps
	msg := sprintf("sandbox.fs.deps cannot be changed by an override (asked for %q)", [input.merged.fs.deps])
}

# Deny lists may grow, never shrink.
violations contains msg if {
	some g in input.base.fs.deny
	not g in {x | some x in input.merged.fs.deny}
	msg := sprintf("sandbox.fs.deny cannot drop %q", [g])
}

violations contains msg if {
	some g in input.base.fs.write_protect
	not g in {x | some x in input.merged.fs.write_protect}
	msg := sprintf("sandbox.fs.write_protect cannot drop %q", [g])
}

# Only the operator's policy file lifts built-in write protection.
violations contains msg if {
	some n in input.merged.fs.write_protect_allow
	not n in {x | some x in input.base.fs.write_protect_allow}
	msg := sprintf("sandbox.fs.write_protect_allow cannot add %q: only the policy file lifts write protection", [n])
}

violations contains msg if {
	some h in input.base.net.deny
	not h in {x | some x in input.merged.net.deny}
	msg := sprintf("sandbox.net.deny cannot drop %q", [h])
}

# Every host an override allows must lie within ceilings.net_hosts (hosts the
# base policy already allows stay allowed). Without the sidecar's
# net_allow_within_ceilings (a hand-made input) no host is within them.
violations contains msg if {
	input.merged.net.enabled
	some h in input.merged.net.allow
	not h in {x | some x in input.base.net.allow}
	not h in {x | some x in input.net_allow_within_ceilings}
	msg := sprintf("sandbox.net.allow host %s is not within ceilings.net_hosts", [h])
}

violations contains "sandbox.net.enabled cannot be turned on: ceilings.net_hosts is empty" if {
	input.merged.net.enabled
	not input.base.net.enabled
	count(input.ceilings.net_hosts) == 0
}

# A run gets the secrets of the base policy's net.secrets; an override may
# add only those ceilings.secrets names (the sidecar has already checked
# that every name is in the secrets catalog).
violations contains msg if {
	some n in input.merged.net.secrets
	not n in {x | some x in input.base.net.secrets}
	not n in {x | some x in input.ceilings.secrets}
	msg := sprintf("sandbox.net.secrets cannot add %q: it is not in ceilings.secrets", [n])
}

# Inspection only adds checks: an override may inspect more hosts, never
# fewer.
violations contains msg if {
	some h in input.base.net.inspect
	not h in {x | some x in input.merged.net.inspect}
	msg := sprintf("sandbox.net.inspect cannot drop %q", [h])
}

# What the request rules see of a body is the operator's choice: a smaller
# preview could hide what a rule looks for.
violations contains msg if {
	input.merged.net.body_preview != input.base.net.body_preview
	msg := sprintf("sandbox.net.body_preview cannot be changed by an override (asked for %s)", [fmt(input.merged.net.body_preview, "bytes")])
}

# fmt renders a limit the way people write it in the policy file.
fmt(n, "bytes") := sprintf("%dg", [n / 1073741824]) if {
	n > 0
	n % 1073741824 == 0
} else := sprintf("%dm", [n / 1048576]) if {
	n > 0
	n % 1048576 == 0
} else := sprintf("%dk", [n / 1024]) if {
	n > 0
	n % 1024 == 0
} else := sprintf("%d bytes", [n])

fmt(n, "ms") := sprintf("%ds", [n / 1000]) if {
	n % 1000 == 0
} else := sprintf("%dms", [n])

fmt(n, "cpus") := sprintf("%v", [n])

fmt(n, "count") := sprintf("%d", [n])
