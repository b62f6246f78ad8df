# An operator module shipped with the policy (ConfigMap gatekeeper-policy,
# key fleet.rego, mounted beside sandbox.policy.yaml; serve --rego-dir).
# The fleet's own rule: sandboxed code may not start processes of its own.
package gatekeeper

deny contains {
	"rule": "fleet.no_subprocess",
	"reason": "sandboxed code may not start processes (subprocess, os.system) in this fleet",
} if {
	input.tool_name == "mcp__sandboxed_code__run"
	some word in ["subprocess", "os.system"]
	contains(input.tool_input.code, word)
}
