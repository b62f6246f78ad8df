package gate

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// RuleBadArguments refuses an allowed nested call whose arguments do not
// match the tool's input schema, before it reaches the server; the refusal
// carries the schema's short form (toolwrap.Signature), so that the model
// can fix its next program without reading the wrappers again.
const RuleBadArguments = "code_calls.bad_arguments"

// maxSchemaErrorBytes bounds the validator's words in the refusal.
const maxSchemaErrorBytes = 300

// badArguments reports whether args (the canonical JSON the server would
// get) fail info's input schema: reason says so (the audit line's
// reason), and message, what the program gets (and the audit line's
// error, as for every refusal), adds the validator's words, bounded, and
// the schema's short form. A schema it cannot read or resolve (a remote
// $ref, say: nothing is fetched) checks nothing, and the server judges
// the call: this check teaches, the policy has already decided.
func badArguments(server, tool string, info runner.ToolInfo, args json.RawMessage) (reason, message string) {
	if len(info.InputSchema) == 0 {
		return "", ""
	}
	var s jsonschema.Schema
	if json.Unmarshal(info.InputSchema, &s) != nil {
		return "", ""
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return "", ""
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return "", ""
	}
	err = rs.Validate(v)
	if err == nil {
		return "", ""
	}
	why := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(why) > maxSchemaErrorBytes {
		cut := maxSchemaErrorBytes
		for cut > 0 && !utf8.RuneStart(why[cut]) {
			cut--
		}
		why = why[:cut] + "…"
	}
	reason = fmt.Sprintf("the arguments do not match the input schema of tool %q of MCP server %q (%s)", tool, server, RuleBadArguments)
	return reason, reason + ": " + why + "; it takes " + toolwrap.Signature(info)
}
