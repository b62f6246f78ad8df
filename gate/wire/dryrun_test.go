package wire

import (
	"bytes"
	"testing"
)

func TestDecodeDryRun(t *testing.T) {
	t.Parallel()
	events := []string{EventPreToolUse, EventCanUseTool, "run"}
	tests := []struct {
		name, in  string
		event     string // for an accepted call
		override  string
		code, msg string // for a refused one
	}{
		{name: "the event defaults to the first", in: `{"tool_name":"Read","tool_input":{}}`, event: EventPreToolUse},
		{name: "another listed event", in: `{"event":"run","tool_name":"mcp__sandboxed_code__run","tool_input":{"language":"python"}}`, event: "run"},
		{name: "an override is kept as sent", in: `{"tool_name":"Read","tool_input":{},"sandbox_policy":{"proc":{"timeout":"30s"}}}`, event: EventPreToolUse, override: `{"proc":{"timeout":"30s"}}`},
		{name: "a PreToolUse without tool_use_id", in: `{"event":"PreToolUse","tool_name":"Read","tool_input":{}}`, event: EventPreToolUse},
		{name: "an unlisted event", in: `{"event":"PostToolUse","tool_name":"Read","tool_input":{}}`, code: CodeInvalidField, msg: `decide: field "event" is "PostToolUse", want one of "PreToolUse", "canUseTool", "run"`},
		{name: "a frame's type is not a dry run key", in: `{"type":"decide","tool_name":"Read","tool_input":{}}`, code: CodeUnknownField, msg: `decide: unknown field "type"`},
		{name: "keys differing only in case", in: `{"tool_name":"Read","Tool_Name":"Bash","tool_input":{}}`, code: CodeDuplicateKey, msg: `decide: keys "tool_name" and "Tool_Name" differ only in case`},
		{name: "a repeated key in the override", in: `{"tool_name":"Read","tool_input":{},"sandbox_policy":{"proc":{},"proc":{}}}`, code: CodeDuplicateKey},
		{name: "no tool_input", in: `{"tool_name":"Read"}`, code: CodeMissingField, msg: `decide: missing field "tool_input"`},
		{name: "a null override", in: `{"tool_name":"Read","tool_input":{},"sandbox_policy":null}`, code: CodeInvalidField},
		{name: "trailing data", in: `{"tool_name":"Read","tool_input":{}} {}`, code: CodeMalformedFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeDryRun([]byte(tt.in), events...)
			if tt.code != "" {
				if err == nil || err.Code != tt.code || (tt.msg != "" && err.Message != tt.msg) {
					t.Fatalf("DecodeDryRun(%s) = %+v, %+v; want %s %q", tt.in, got, err, tt.code, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeDryRun(%s): %v", tt.in, err)
			}
			if got.Decide.Event != tt.event || !bytes.Equal(got.SandboxPolicy, []byte(tt.override)) && tt.override != "" {
				t.Fatalf("DecodeDryRun(%s) = %+v; want event %q, override %s", tt.in, got, tt.event, tt.override)
			}
			if tt.override == "" && got.SandboxPolicy != nil {
				t.Fatalf("DecodeDryRun(%s) has override %s", tt.in, got.SandboxPolicy)
			}
		})
	}
}
