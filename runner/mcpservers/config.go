package mcpservers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Config is one MCP server as the sidecar reaches it: a stdio server
// (Command) or a streamable HTTP server (URL). The policy validates it
// (gate/policy, mcp_servers); New checks only what it needs to connect.
type Config struct {
	// Name is the server's name in the policy and in the sandbox's wrappers.
	Name string
	// Description says what the server is for.
	Description string
	// Command is the program and its arguments of a stdio server.
	Command []string
	// Env is the stdio server's environment, added to the few variables it
	// inherits (see inheritedEnv).
	Env map[string]Value
	// URL is the streamable HTTP server's endpoint.
	URL string
	// Headers are sent with every request to URL.
	Headers map[string]Value
}

// Value is a literal, or a secret the sidecar reads when it connects: the
// environment variable FromEnv or the content of the file FromFile (one
// trailing newline removed). A value read is never logged nor put in an
// error.
type Value struct {
	Literal, FromEnv, FromFile string
}

// inheritedEnv are the sidecar's variables a stdio server inherits (when
// set); nothing else of the sidecar's environment reaches it.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER"}

// maxSecretFile bounds a from_file read.
const maxSecretFile = 64 << 10

// Resolve reads v. lookup is the sidecar's environment. Errors name the
// variable or file, never a value read. The gate reads a run's egress
// secrets (gate/policy secrets) with it too, so that both kinds of
// reference are read alike.
func (v Value) Resolve(lookup func(string) (string, bool)) (string, error) {
	switch {
	case v.FromEnv != "":
		s, ok := lookup(v.FromEnv)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", v.FromEnv)
		}
		return s, nil
	case v.FromFile != "":
		f, err := os.Open(v.FromFile)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", v.FromFile, errors.Unwrap(err))
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
		switch {
		case err != nil:
			return "", fmt.Errorf("read %s: %w", v.FromFile, err)
		case len(data) > maxSecretFile:
			return "", fmt.Errorf("read %s: larger than %d bytes", v.FromFile, maxSecretFile)
		}
		data = bytes.TrimSuffix(data, []byte("\n"))
		data = bytes.TrimSuffix(data, []byte("\r"))
		return string(data), nil
	}
	return v.Literal, nil
}

// resolveAll resolves every value of m, naming the key of the first that
// fails (where is "env" or "header").
func resolveAll(m map[string]Value, where string, lookup func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, err := v.Resolve(lookup)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", where, k, err)
		}
		if strings.ContainsAny(s, "\r\n\x00") && where == "header" {
			return nil, fmt.Errorf("%s %s: the value read has a line break or NUL, which a header may not carry", where, k)
		}
		out[k] = s
	}
	return out, nil
}
