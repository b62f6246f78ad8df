package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestTheSharedApprovalFramesDecodeAndEncodeAsTheClientHasThem pins the
// Go side of the ask frames to the file the TypeScript client is pinned
// to.
func TestTheSharedApprovalFramesDecodeAndEncodeAsTheClientHasThem(t *testing.T) {
	t.Parallel()
	f := sharedFrames(t, "approvals.json")
	for name, want := range map[string]Request{
		"open_query":     &OpenQuery{ID: "2", Approvals: true},
		"approval_allow": &Approval{ID: "a_1", Decision: ApprovalAllow},
		"approval_deny":  &Approval{ID: "a_2", Decision: ApprovalDeny, Message: "not customers of the EU region"},
	} {
		got, e := Decode(f[name])
		if e != nil {
			t.Fatalf("%s: Decode = %+v", name, e)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Decode = %#v, want %#v", name, got, want)
		}
		if b, err := json.Marshal(want); err != nil || !bytes.Equal(b, f[name]) {
			t.Errorf("%s: Marshal = %s (%v), want %s", name, b, err, f[name])
		}
	}
	for name, reply := range map[string]Reply{
		"approval_request": ApprovalRequest{ID: "a_1", QueryID: "q_6b0c", RunID: "r_9a1f", ToolUseID: "toolu_02", Language: "python",
			Server: "crm", Tool: "delete_customer", ToolName: "mcp__crm__delete_customer", ServerSource: "policy",
			Arguments: json.RawMessage(`{"customer_id":"c-1"}`), CallSeq: 3, Rule: "tools.ask_list", Reason: "mcp__crm__delete_customer needs a human's approval", TimeoutMS: 30000},
		"approval_cancel": ApprovalCancel{ID: "a_1", QueryID: "q_6b0c"},
	} {
		got, err := Encode(reply)
		if err != nil || !bytes.Equal(got, f[name]) {
			t.Errorf("%s: Encode = %s (%v), want %s", name, got, err, f[name])
		}
		checkGolden(t, "reply_"+name, append(got, '\n'))
	}
}

func TestApprovalFramesRefuseWhatDecidesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, frame, code, msg string }{
		{"an approval without decision", `{"type":"approval","id":"a_1"}`, CodeMissingField, `missing field "decision"`},
		{"a decision that is neither allow nor deny", `{"type":"approval","id":"a_1","decision":"ask"}`, CodeInvalidField, `"decision"`},
		{"a decision in upper case", `{"type":"approval","id":"a_1","decision":"ALLOW"}`, CodeInvalidField, `"decision"`},
		{"an approval with a null message", `{"type":"approval","id":"a_1","decision":"deny","message":null}`, CodeInvalidField, `"message"`},
		{"a message past MaxApprovalMessageChars", `{"type":"approval","id":"a_1","decision":"deny","message":"` + strings.Repeat("x", MaxApprovalMessageChars+1) + `"}`, CodeInvalidField, `at most 4096 characters`},
		{"an unknown field of an approval", `{"type":"approval","id":"a_1","decision":"allow","updatedInput":{}}`, CodeUnknownField, `unknown field "updatedInput"`},
		{"approvals that is not a boolean", `{"type":"open_query","id":"2","approvals":"yes"}`, CodeInvalidField, `"approvals" must be a boolean`},
		{"approvals beside claude_code_session", `{"type":"open_query","id":"2","claude_code_session":"s1","approvals":true}`, CodeInvalidField, `excludes "approvals"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, e := Decode([]byte(tc.frame))
			if e == nil || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("Decode(%s) = %+v; want %s containing %q", tc.frame, e, tc.code, tc.msg)
			}
		})
	}
}
