package gatekeeper.constraints_test

import data.gatekeeper.constraints

_base := {
	"fs": {"image": "", "workspace": {"size": 67108864}, "tmp": {"size": 67108864}, "deps": "", "deny": ["~/.ssh/**"], "write_protect": ["**/deploy"], "write_protect_allow": ["ide_config"]},
	"net": {"enabled": false, "allow": [], "deny": ["evil.example"], "inspect": ["api.github.com"], "secrets": ["github"], "body_preview": 1024},
	"proc": {"cpus": 1, "memory": 268435456, "pids": 128, "timeout": 10000, "runtime": "runc", "user": 65534},
	"output": {"max_bytes": 1048576, "max_files": 20, "max_files_bytes": 4194304},
	"session": {"idle_timeout": 0, "max_lifetime": 3600000},
}

_ceilings := {
	"cpus": 2, "memory": 1073741824, "pids": 512, "timeout": 120000, "tmpfs": 536870912, "output_bytes": 8388608,
	"output_files": 50, "output_files_bytes": 16777216,
	"session": {"idle_timeout": 1200000, "max_lifetime": 3600000},
	"net_hosts": ["pypi.org", "*.pythonhosted.org"], "images": ["py:3.12"], "runtimes": ["runc", "runsc"],
	"secrets": ["pypi"],
}

_check(patch) := v if {
	v := constraints.violations with input as {"base": _base, "merged": json.patch(_base, patch), "ceilings": _ceilings}
}

test_unchanged_base_has_no_violations if count(_check([])) == 0

test_memory_over_ceiling if {
	_check([{"op": "replace", "path": "/proc/memory", "value": 8589934592}]) == {"sandbox.proc.memory 8g exceeds ceiling 1g"}
}

test_every_violation_is_listed if {
	v := _check([
		{"op": "replace", "path": "/proc/memory", "value": 8589934592},
		{"op": "replace", "path": "/proc/timeout", "value": 600000},
		{"op": "replace", "path": "/proc/cpus", "value": 4},
	])
	v == {"sandbox.proc.memory 8g exceeds ceiling 1g", "sandbox.proc.timeout 600s exceeds ceiling 120s", "sandbox.proc.cpus 4 exceeds ceiling 2"}
}

test_limits_within_ceilings_pass if {
	count(_check([
		{"op": "replace", "path": "/proc/memory", "value": 536870912},
		{"op": "replace", "path": "/proc/timeout", "value": 30000},
	])) == 0
}

test_root_is_never_allowed if {
	"sandbox.proc.user 0 (root) is never allowed" in _check([{"op": "replace", "path": "/proc/user", "value": 0}])
}

test_deps_cannot_be_added if {
	_check([{"op": "replace", "path": "/fs/deps", "value": "/opt/deps"}]) == {"sandbox.fs.deps cannot be changed by an override (asked for \"/opt/deps\")"}
}

test_deny_globs_cannot_shrink if {
	_check([{"op": "replace", "path": "/fs/deny", "value": []}]) == {"sandbox.fs.deny cannot drop \"~/.ssh/**\""}
}

test_deny_globs_may_grow if {
	count(_check([{"op": "add", "path": "/fs/deny/-", "value": "**/secrets/**"}])) == 0
}

# The sidecar computes net_allow_within_ceilings with the egress proxy's own
# pattern functions (tested in internal/nethost and through the sidecar in
# gate); these tests pin the rule over that fact.
_check_net(allow, within) := v if {
	v := constraints.violations with input as {
		"base": _base,
		"merged": json.patch(_base, [{"op": "replace", "path": "/net/enabled", "value": true}, {"op": "replace", "path": "/net/allow", "value": allow}]),
		"ceilings": _ceilings,
		"net_allow_within_ceilings": within,
	}
}

test_net_host_inside_ceilings if {
	count(_check_net(["pypi.org", "files.pythonhosted.org"], ["pypi.org", "files.pythonhosted.org"])) == 0
}

test_net_host_outside_ceilings if {
	_check_net(["pypi.org", "evil.example", "pythonhosted.org"], ["pypi.org"]) == {"sandbox.net.allow host evil.example is not within ceilings.net_hosts", "sandbox.net.allow host pythonhosted.org is not within ceilings.net_hosts"}
}

test_net_host_without_the_fact_is_outside_ceilings if {
	v := constraints.violations with input as {"base": _base, "merged": json.patch(_base, [{"op": "replace", "path": "/net/enabled", "value": true}, {"op": "replace", "path": "/net/allow", "value": ["pypi.org"]}]), "ceilings": _ceilings}
	v == {"sandbox.net.allow host pypi.org is not within ceilings.net_hosts"}
}

test_net_host_the_base_allows_stays_allowed if {
	b := json.patch(_base, [{"op": "replace", "path": "/net/allow", "value": ["corp.example"]}])
	v := constraints.violations with input as {"base": b, "merged": json.patch(b, [{"op": "replace", "path": "/net/enabled", "value": true}]), "ceilings": _ceilings, "net_allow_within_ceilings": []}
	count(v) == 0
}

test_net_deny_cannot_shrink if {
	"sandbox.net.deny cannot drop \"evil.example\"" in _check([{"op": "replace", "path": "/net/deny", "value": []}])
}

test_runtime_outside_ceilings if {
	"sandbox.proc.runtime \"kata\" is not in ceilings.runtimes" in _check([{"op": "replace", "path": "/proc/runtime", "value": "kata"}])
}

test_runsc_within_ceilings if count(_check([{"op": "replace", "path": "/proc/runtime", "value": "runsc"}])) == 0

# _image_check: the base on profile python, ceilings.images python-data and
# an image reference, an override asking for image.
_image_check(image) := v if {
	base := json.patch(_base, [{"op": "replace", "path": "/fs/image", "value": "python"}])
	merged := json.patch(base, [{"op": "replace", "path": "/fs/image", "value": image}])
	ceilings := object.union(_ceilings, {"images": ["python-data", "py:3.12"]})
	v := constraints.violations with input as {"base": base, "merged": merged, "ceilings": ceilings}
}

test_image_outside_ceilings if {
	_image_check("node") == {"sandbox.fs.image \"node\" is not in ceilings.images (an override may choose: py:3.12, python, python-data)"}
}

test_image_reference_outside_ceilings if {
	_image_check("attacker/image:latest") == {"sandbox.fs.image \"attacker/image:latest\" is not in ceilings.images (an override may choose: py:3.12, python, python-data)"}
}

test_profile_in_ceilings if count(_image_check("python-data")) == 0

test_image_reference_in_ceilings if count(_image_check("py:3.12")) == 0

test_base_image_needs_no_ceiling if count(_image_check("python")) == 0

test_tmpfs_and_output_ceilings if {
	v := _check([
		{"op": "replace", "path": "/fs/tmp/size", "value": 1073741824},
		{"op": "replace", "path": "/output/max_bytes", "value": 16777216},
	])
	v == {"sandbox.fs.tmp.size 1g exceeds ceiling 512m", "sandbox.output.max_bytes 16m exceeds ceiling 8m"}
}

test_file_output_ceilings if {
	v := _check([
		{"op": "replace", "path": "/output/max_files", "value": 51},
		{"op": "replace", "path": "/output/max_files_bytes", "value": 33554432},
	])
	v == {"sandbox.output.max_files 51 exceeds ceiling 50", "sandbox.output.max_files_bytes 32m exceeds ceiling 16m"}
}

test_file_output_at_ceilings if {
	count(_check([
		{"op": "replace", "path": "/output/max_files", "value": 50},
		{"op": "replace", "path": "/output/max_files_bytes", "value": 16777216},
	])) == 0
}

test_network_needs_ceiling_hosts if {
	c := json.patch(_ceilings, [{"op": "replace", "path": "/net_hosts", "value": []}])
	v := constraints.violations with input as {"base": _base, "merged": json.patch(_base, [{"op": "replace", "path": "/net/enabled", "value": true}]), "ceilings": c}
	"sandbox.net.enabled cannot be turned on: ceilings.net_hosts is empty" in v
}

test_write_protect_may_grow if {
	count(_check([{"op": "add", "path": "/fs/write_protect/-", "value": "**/Makefile"}])) == 0
}

test_write_protect_may_not_shrink if {
	_check([{"op": "replace", "path": "/fs/write_protect", "value": []}]) == {"sandbox.fs.write_protect cannot drop \"**/deploy\""}
}

test_an_override_may_not_lift_write_protection if {
	_check([{"op": "add", "path": "/fs/write_protect_allow/-", "value": "git_dir"}]) == {"sandbox.fs.write_protect_allow cannot add \"git_dir\": only the policy file lifts write protection"}
}

test_an_override_may_keep_or_drop_what_the_base_lifts if {
	count(_check([{"op": "replace", "path": "/fs/write_protect_allow", "value": []}])) == 0
}

test_a_session_within_the_ceilings_passes if {
	count(_check([{"op": "replace", "path": "/session/idle_timeout", "value": 300000}])) == 0
}

test_a_session_may_be_turned_off if {
	count(_check([{"op": "replace", "path": "/session/idle_timeout", "value": 0}])) == 0
}

test_a_session_idle_timeout_over_its_ceiling if {
	_check([{"op": "replace", "path": "/session/idle_timeout", "value": 1800000}]) == {"sandbox.session.idle_timeout 1800s exceeds ceiling 1200s"}
}

test_a_session_lifetime_over_its_ceiling if {
	_check([{"op": "replace", "path": "/session/max_lifetime", "value": 7200000}]) == {"sandbox.session.max_lifetime 7200s exceeds ceiling 3600s"}
}

test_secrets_within_ceilings_may_be_added if {
	count(_check([{"op": "add", "path": "/net/secrets/-", "value": "pypi"}])) == 0
}

test_secrets_outside_ceilings_cannot_be_added if {
	_check([{"op": "add", "path": "/net/secrets/-", "value": "aws"}]) == {"sandbox.net.secrets cannot add \"aws\": it is not in ceilings.secrets"}
}

test_base_secrets_may_be_dropped if {
	count(_check([{"op": "replace", "path": "/net/secrets", "value": []}])) == 0
}

test_inspect_may_grow if {
	count(_check([{"op": "add", "path": "/net/inspect/-", "value": "pypi.org"}])) == 0
}

test_inspect_cannot_shrink if {
	_check([{"op": "replace", "path": "/net/inspect", "value": []}]) == {"sandbox.net.inspect cannot drop \"api.github.com\""}
}

test_body_preview_cannot_change if {
	_check([{"op": "replace", "path": "/net/body_preview", "value": 16}]) == {"sandbox.net.body_preview cannot be changed by an override (asked for 16 bytes)"}
}
