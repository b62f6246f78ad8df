package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"golang.org/x/net/http/httpguts"
	"gopkg.in/yaml.v3"
)

// MCPServer is one of the operator's MCP servers that sandboxed code may
// call through the sidecar (mcp_servers.<name>). It is either a stdio
// server (Command, with Args and Env) or a streamable HTTP server (URL, with
// Headers), never both. The sidecar is its MCP client: the sandbox never
// sees the command, the URL or any value below.
type MCPServer struct {
	// Description says what the server is for, in one line; the model reads
	// it in the tool description that names the servers.
	Description string `yaml:"description" json:"description,omitempty"`
	// Command is the program and its arguments: a list, or one program name
	// followed by Args. The sidecar starts it with only Env and a few of its
	// own variables (PATH, HOME, LANG, TMPDIR), never its whole environment.
	Command MCPCommand `yaml:"command" json:"command,omitempty"`
	Args    []string   `yaml:"args" json:"args,omitempty"`
	// Env is the stdio server's environment.
	Env map[string]MCPValue `yaml:"env" json:"env,omitempty"`
	// URL is the streamable HTTP endpoint: https, or http to a loopback
	// host (or without credentials).
	URL string `yaml:"url" json:"url,omitempty"`
	// Headers are sent with every HTTP request to URL.
	Headers map[string]MCPValue `yaml:"headers" json:"headers,omitempty"`
}

// Stdio reports whether the server is started as a command.
func (s MCPServer) Stdio() bool { return len(s.Command) > 0 }

// Argv is the stdio server's command line: Command followed by Args.
func (s MCPServer) Argv() []string { return append(slices.Clone([]string(s.Command)), s.Args...) }

// MCPCommand is a server's command: written as one program name (with
// args beside it) or as a list of the program and its arguments.
type MCPCommand []string

func (c *MCPCommand) checkNode(w *walker, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		w.check(n, reflectString, path)
	case yaml.SequenceNode:
		w.check(n, reflectStrings, path)
	default:
		w.fail(n, path, "expected a program name or a list of the program and its arguments")
	}
}

// UnmarshalYAML reads either shape.
func (c *MCPCommand) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = MCPCommand{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*c = list
	return nil
}

// MCPValue is the value of an environment variable or a header: a literal
// that is no secret, or a reference the sidecar reads when it connects,
// written {from_env: NAME} (the sidecar's environment variable NAME) or
// {from_file: /absolute/path} (the file's content, one trailing newline
// removed). A secret is never written in the policy: a literal that looks
// like one, or under a name that does, is refused.
type MCPValue struct {
	Literal  string `yaml:"-"`
	FromEnv  string `yaml:"from_env"`
	FromFile string `yaml:"from_file"`
}

// Ref reports whether the value is read by the sidecar rather than written.
func (v MCPValue) Ref() bool { return v.FromEnv != "" || v.FromFile != "" }

var (
	reflectString   = reflect.TypeFor[string]()
	reflectStrings  = reflect.TypeFor[[]string]()
	reflectValueRef = reflect.TypeFor[mcpValueRef]()
)

// mcpValueRef is the mapping shape of an MCPValue, for the walker.
type mcpValueRef struct {
	FromEnv  string `yaml:"from_env" json:"from_env,omitempty"`
	FromFile string `yaml:"from_file" json:"from_file,omitempty"`
}

func (v *MCPValue) checkNode(w *walker, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		w.check(n, reflectString, path)
	case yaml.MappingNode:
		w.check(n, reflectValueRef, path)
	default:
		w.fail(n, path, "expected a value, {from_env: NAME} or {from_file: PATH}")
	}
}

// UnmarshalYAML reads either shape.
func (v *MCPValue) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*v = MCPValue{Literal: n.Value}
		return nil
	}
	var r mcpValueRef
	if err := n.Decode(&r); err != nil {
		return err
	}
	*v = MCPValue{FromEnv: r.FromEnv, FromFile: r.FromFile}
	return nil
}

// MarshalJSON writes a literal as a string and a reference as its mapping:
// the effective policy (Rego input, its hash) names where a secret comes
// from, never the secret.
func (v MCPValue) MarshalJSON() ([]byte, error) {
	if v.Ref() {
		return json.Marshal(mcpValueRef{v.FromEnv, v.FromFile})
	}
	return json.Marshal(v.Literal)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *MCPValue) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*v = MCPValue{Literal: s}
		return nil
	}
	var r mcpValueRef
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	*v = MCPValue{FromEnv: r.FromEnv, FromFile: r.FromFile}
	return nil
}

// MCPServerNameRE is what a server name must match: it becomes a Python
// module and a Node module name in the sandbox's generated wrappers.
var MCPServerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// pythonKeywords cannot name a Python module that code imports.
var pythonKeywords = []string{"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// transportHeaders are set by the MCP transport itself.
var transportHeaders = []string{"accept", "connection", "content-length", "content-type", "host", "last-event-id", "mcp-protocol-version", "mcp-session-id", "te", "trailer", "transfer-encoding", "upgrade"}

// secretWords mark a name (an environment variable, a header, a flag or a
// URL query parameter) whose value is a secret: a word of the name (split
// at _ - .) that contains one of them, or is one of secretNames.
var (
	secretWords = []string{"token", "secret", "passw", "pwd", "credential", "cookie", "auth", "apikey", "session", "signature", "bearer", "privatekey", "accesskey"}
	secretNames = []string{"key", "pat", "pass", "sig", "jwt"}
)

// SecretName reports whether a variable, header, flag or parameter named
// name holds a secret by its name (GITHUB_TOKEN, Authorization, X-Api-Key).
func SecretName(name string) bool {
	for w := range strings.FieldsFuncSeq(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if slices.Contains(secretNames, w) {
			return true
		}
		for _, s := range secretWords {
			if strings.Contains(w, s) {
				return true
			}
		}
	}
	return false
}

// secretValueRE matches the shapes of well-known credentials: GitHub,
// GitLab, Slack, OpenAI/Anthropic-style and AWS keys, HTTP credentials,
// PEM private keys and JWTs.
var secretValueRE = regexp.MustCompile(`(?i)\b(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{8,}|sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16})|(?i)^\s*(bearer|basic|token)\s+\S|-----BEGIN [A-Z ]*PRIVATE KEY|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.`)

// SecretValue reports whether s looks like a credential.
func SecretValue(s string) bool { return secretValueRE.MatchString(s) }

func (v *validator) mcpServers(servers map[string]MCPServer) {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v.mcpServer(name, servers[name])
	}
}

func (v *validator) mcpServer(name string, s MCPServer) {
	pre := "mcp_servers." + name
	switch {
	case !MCPServerNameRE.MatchString(name):
		v.add(pre, "server name %q must match %s (it names a Python and a Node module)", name, MCPServerNameRE)
	case slices.Contains(pythonKeywords, name):
		v.add(pre, "server name %q is a Python keyword, which no program could import", name)
	}
	if len(s.Description) > 500 || strings.ContainsAny(s.Description, "\r\n") {
		v.add(pre+".description", "must be one line of at most 500 bytes")
	}
	switch {
	case s.Stdio() && s.URL != "":
		v.add(pre, "set either command (a stdio server) or url (a streamable HTTP server), not both")
	case !s.Stdio() && s.URL == "":
		v.add(pre, "set command (a stdio server) or url (a streamable HTTP server)")
	case s.Stdio():
		v.mcpCommand(pre, s)
	default:
		v.mcpURL(pre, s)
	}
}

func (v *validator) mcpCommand(pre string, s MCPServer) {
	if len(s.Command) > 1 && len(s.Args) > 0 {
		v.add(pre+".args", "the command is already a list with its arguments; put them in one place")
	}
	if strings.TrimSpace(s.Command[0]) == "" {
		v.add(pre+".command", "the program name is empty")
	}
	if len(s.Headers) > 0 {
		v.add(pre+".headers", "headers are for a url server; a stdio server takes env")
	}
	argAt := func(i int) string {
		if len(s.Command) > 1 {
			return fmt.Sprintf("%s.command[%d]", pre, i)
		}
		if i == 0 {
			return pre + ".command"
		}
		return fmt.Sprintf("%s.args[%d]", pre, i-1)
	}
	for i, a := range s.Argv() {
		flag, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case SecretValue(a):
			v.add(argAt(i), "looks like a credential; a command line is readable by every process on the host: pass it in env as {from_env: NAME} or {from_file: PATH}")
		case strings.HasPrefix(a, "-") && hasVal && val != "" && SecretName(flag):
			v.add(argAt(i), "--%s= carries a secret on the command line, readable by every process on the host: pass it in env as {from_env: NAME} or {from_file: PATH}", flag)
		}
	}
	for _, k := range sortedKeys(s.Env) {
		at := pre + ".env." + k
		if !envNameRE.MatchString(k) {
			v.add(at, "%q is not an environment variable name", k)
		}
		v.mcpValue(at, k, s.Env[k])
	}
}

func (v *validator) mcpURL(pre string, s MCPServer) {
	if len(s.Env) > 0 {
		v.add(pre+".env", "env is for a stdio server; a url server takes headers")
	}
	if len(s.Args) > 0 {
		v.add(pre+".args", "args are for a stdio server")
	}
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		v.add(pre+".url", "%v", errors.Unwrap(err))
		return
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		v.add(pre+".url", "%q is not an http:// or https:// URL", s.URL)
		return
	case u.User != nil:
		v.add(pre+".url", "credentials in the URL are refused: send them in headers as {from_env: NAME} or {from_file: PATH}")
	case u.Fragment != "":
		v.add(pre+".url", "a URL fragment is never sent; remove it")
	}
	for k, vals := range u.Query() {
		if SecretName(k) || slices.ContainsFunc(vals, SecretValue) {
			v.add(pre+".url", "query parameter %q carries a secret in the URL, which servers and proxies log: send it in headers as {from_env: NAME} or {from_file: PATH}", k)
		}
	}
	hasRef := false
	for _, k := range sortedKeys(s.Headers) {
		at := pre + ".headers." + k
		val := s.Headers[k]
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			v.add(at, "%q is not an HTTP header name", k)
		case slices.Contains(transportHeaders, strings.ToLower(k)):
			v.add(at, "%s is set by the MCP transport", k)
			continue
		case !val.Ref() && !httpguts.ValidHeaderFieldValue(val.Literal):
			v.add(at, "the value has characters a header may not carry")
		}
		hasRef = hasRef || val.Ref()
		v.mcpValue(at, k, val)
	}
	if hasRef && u.Scheme == "http" && !nethost.IsLoopback(u.Hostname()) {
		v.add(pre+".url", "credentials would travel in clear text to %s: use https (plain http only to a loopback host)", u.Hostname())
	}
}

// mcpValue checks one env or header value named name.
func (v *validator) mcpValue(at, name string, val MCPValue) {
	switch {
	case val.FromEnv != "" && val.FromFile != "":
		v.add(at, "set from_env or from_file, not both")
	case val.FromEnv != "" && !envNameRE.MatchString(val.FromEnv):
		v.add(at+".from_env", "%q is not an environment variable name", val.FromEnv)
	case val.FromFile != "" && !filepath.IsAbs(val.FromFile):
		v.add(at+".from_file", "%q must be an absolute path", val.FromFile)
	case val.Ref():
	case SecretValue(val.Literal):
		v.add(at, "looks like a credential, which the policy never holds: write {from_env: NAME} or {from_file: PATH}")
	case SecretName(name) && val.Literal != "":
		v.add(at, "%s holds a secret by its name, which the policy never holds: write {from_env: NAME} or {from_file: PATH}", name)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
