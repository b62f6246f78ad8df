# An operator module (put it in --rego-dir): sandboxed code may only read
# our organization's repositories through the GitHub API. GET and HEAD
# only, on api.github.com/repos/our-org/**; any other request to
# api.github.com is refused with the rule's name, which the program reads
# in the proxy's 403 (and the model through the program's output).
#
# Requests are decided only for intercepted hosts: list api.github.com in
# sandbox.net.inspect, or give the run a secret whose hosts include it.
# `gatekeeper policy check` refuses a rule that compares
# input.http.method with a lower-case name, input.http.host with a host
# that is not intercepted, or input.http.path with a literal that does
# not start with "/". Test a rule with a decide frame of event
# http_request (docs/protocol.md) before you deploy it.
package gatekeeper

# The standard methods arrive in upper case, as clients send them.
deny contains {
	"rule": "github.read_only",
	"reason": sprintf("only GET and HEAD reach api.github.com from the sandbox; %s %s is refused", [input.http.method, input.http.path]),
} if {
	input.event == "http_request"
	input.http.host == "api.github.com"
	not input.http.method in {"GET", "HEAD"}
}

deny contains {
	"rule": "github.our_org_only",
	"reason": sprintf("only /repos/our-org/ is readable on api.github.com from the sandbox; %s is refused", [input.http.path]),
} if {
	input.event == "http_request"
	input.http.host == "api.github.com"
	not _github_our_org
}

# The path arrives as sent. A dot segment or an escaped "/" or "." could
# mean another repository to the server than the prefix says, so such a
# path is no path of ours.
_github_our_org if {
	startswith(input.http.path, "/repos/our-org/")
	not regex.match(`(^|/)\.\.?(/|$)|%2[eEfF]|\\`, input.http.path)
}
