package gatekeeper_test

# Tests of issue 10's classes in the built-in policy: the write-protect list
# (sections 1, 1b, 7) and findings gatekeeper cannot read (section 6). The
# helpers (_in, _path, _fact) are in gatekeeper_test.rego.

import data.gatekeeper

_write_policy := {
	"tools": {"allow": ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS", "TodoWrite"], "deny": [], "ask": []},
	"sandbox": _policy.sandbox,
}

_settings_match := {"glob": "**/.claude", "entry": "agent_config", "why": "it is Claude Code's own configuration"}

# _protected is a path fact as the sidecar builds it for a path a
# write-protect glob matches.
_protected(path, m) := object.union(_path(path, path), {"write_protect_matches": [m], "deny_within": [], "within_error": ""})

test_every_write_tool_is_refused_a_write_protected_path if {
	count(gatekeeper.host_fs_write_tools) >= 4 # every over an empty set would hold vacuously
	every tool in gatekeeper.host_fs_write_tools {
		d := gatekeeper.decision with input as _in(tool, {"policy": _write_policy, "paths": [_protected("/srv/app/.claude/settings.json", _settings_match)]})
		d.decision == "deny"
		d.rule == "host_fs.write_protected"
	}
}

test_the_write_tools_are_the_four_that_write if {
	gatekeeper.host_fs_write_tools == {"Write", "Edit", "MultiEdit", "NotebookEdit"}
}

test_write_protected_reason_names_the_entry_the_glob_and_why if {
	d := gatekeeper.decision with input as _in("Write", {"policy": _write_policy, "paths": [_protected("/srv/app/.claude/settings.json", _settings_match)]})
	contains(d.reason, "Write of /srv/app/.claude/settings.json is refused: the path is write-protected (agent_config, pattern \"**/.claude\") because it is Claude Code's own configuration")
	contains(d.reason, "may read it but never create, change or move into it")
}

test_reads_and_searches_of_a_write_protected_path_stay_allowed if {
	every tool in {"Read", "Glob", "Grep", "LS"} {
		d := gatekeeper.decision with input as _in(tool, {"policy": _write_policy, "paths": [_protected("/srv/app/.claude/settings.json", _settings_match)]})
		d.decision == "allow"
		d.rule == "host_fs.inside_workspace"
	}
}

test_a_write_without_a_write_protect_match_is_allowed if {
	p := object.union(_path("/srv/app/src/main.py", "/srv/app/src/main.py"), {"write_protect_matches": []})
	d := gatekeeper.decision with input as _in("Write", {"policy": _write_policy, "paths": [p]})
	d.decision == "allow"
}

test_write_protection_holds_for_an_operator_allow if {
	d := gatekeeper.decision with input as _in("Edit", {"policy": _write_policy, "paths": [_protected("/srv/app/.git/config", {"glob": "**/.git", "entry": "git_dir", "why": "git"})]})
		with gatekeeper.allow as {{"rule": "team.edit_anything", "reason": "yes"}}
	d.rule == "host_fs.write_protected"
}

test_a_bad_path_is_not_judged_write_protected if {
	p := {"field": "file_path", "raw": "/proc/self/cwd/x", "abs": "", "resolved": "", "covered": [], "deny_matches": [], "write_protect_matches": [], "error": "process-relative"}
	d := gatekeeper.decision with input as _in("Write", {"policy": _write_policy, "paths": [p]})
	d.rule == "host_fs.bad_path"
}

test_a_string_deny_finding_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {"todos are off"}
	d.decision == "deny"
	d.rule == "gatekeeper.unreadable_finding"
	contains(d.reason, "the policy's deny set holds a finding gatekeeper cannot read (\"todos are off\")")
}

test_a_deny_finding_without_reason_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {{"rule": "team.x"}}
	d.rule == "gatekeeper.unreadable_finding"
}

test_a_finding_with_an_extra_key_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {{"rule": "team.x", "reason": "r", "severity": "high"}}
	d.rule == "gatekeeper.unreadable_finding"
}

test_a_finding_with_an_empty_reason_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {{"rule": "team.x", "reason": ""}}
	d.rule == "gatekeeper.unreadable_finding"
}

test_an_unreadable_ask_denies_rather_than_vanishing if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.ask as {"confirm this"}
	d.decision == "deny"
	d.rule == "gatekeeper.unreadable_finding"
	contains(d.reason, "the policy's ask set")
}

test_an_unreadable_allow_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.allow as {{"rule": 5, "reason": "r"}}
	d.decision == "deny"
	d.rule == "gatekeeper.unreadable_finding"
}

test_a_readable_deny_beside_an_unreadable_one_still_denies if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {"x", {"rule": "a.first", "reason": "r"}}
	d == {"decision": "deny", "rule": "a.first", "reason": "r"}
}

test_a_long_unreadable_finding_is_cut_in_the_reason if {
	d := gatekeeper.decision with input as _in("TodoWrite", {}) with gatekeeper.deny as {concat("", [sprintf("%v", [x]) | some x in numbers.range(1, 200)])}
	d.rule == "gatekeeper.unreadable_finding"
	count(d.reason) < 400
}

# Issue 20, section 6: a bare repository built anywhere in the workspace.

_repo_path(path, repo) := object.union(_path(path, path), {"write_protect_matches": [], "deny_within": [], "within_error": "", "git_repository": repo})

test_every_write_tool_is_refused_a_path_that_makes_a_git_repository if {
	count(gatekeeper.host_fs_write_tools) >= 4 # every over an empty set would hold vacuously
	every tool in gatekeeper.host_fs_write_tools {
		d := gatekeeper.decision with input as _in(tool, {"policy": _write_policy, "paths": [_repo_path("/srv/app/evil/config", "/srv/app/evil")]})
		d.decision == "deny"
		d.rule == "host_fs.write_protected_git_repository"
		contains(d.reason, " of /srv/app/evil/config is refused: /srv/app/evil would be a git repository")
	}
}

test_reads_in_a_git_repository_stay_allowed if {
	every tool in {"Read", "Glob", "Grep", "LS"} {
		d := gatekeeper.decision with input as _in(tool, {"policy": _write_policy, "paths": [_repo_path("/srv/app/evil/config", "/srv/app/evil")]})
		d.decision == "allow"
	}
}

test_a_write_that_makes_no_git_repository_is_allowed if {
	d := gatekeeper.decision with input as _in("Write", {"policy": _write_policy, "paths": [_repo_path("/srv/app/evil/config", "")]})
	d.decision == "allow"
}

test_the_git_repository_rule_holds_for_an_operator_allow if {
	d := gatekeeper.decision with input as _in("Write", {"policy": _write_policy, "paths": [_repo_path("/srv/app/evil/HEAD", "/srv/app/evil")]})
		with gatekeeper.allow as {{"rule": "team.edit_anything", "reason": "yes"}}
	d.rule == "host_fs.write_protected_git_repository"
}

test_lifting_git_dir_lifts_the_git_repository_rule if {
	sb := object.union(_write_policy.sandbox, {"fs": {"write_protect_allow": ["git_dir"]}})
	d := gatekeeper.decision with input as _in("Write", {"policy": object.union(_write_policy, {"sandbox": sb}), "paths": [_repo_path("/srv/app/evil/HEAD", "/srv/app/evil")]})
	d.decision == "allow"
}

test_write_protected_wins_over_the_git_repository_rule_inside_dot_git if {
	p := object.union(_protected("/srv/app/.git/config", {"glob": "**/.git", "entry": "git_dir", "why": "git"}), {"git_repository": "/srv/app/.git"})
	d := gatekeeper.decision with input as _in("Edit", {"policy": _write_policy, "paths": [p]})
	d.rule == "host_fs.write_protected"
}
