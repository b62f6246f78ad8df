package wire_test

import (
	"fmt"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// A connection's reader decodes each text frame; a refused frame is answered
// with the error frame Decode returns, and the connection goes on.
func ExampleDecode() {
	frames := []string{
		`{"type":"decide","id":"3","query_id":"q_1","event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/srv/app/notes.txt"},"tool_use_id":"toolu_01"}`,
		`{"type":"decide","id":"4","query_id":"q_1","event":"PreToolUse","tool_name":"Read","Tool_Name":"Bash","tool_input":{},"tool_use_id":"toolu_02"}`,
	}
	for _, f := range frames {
		req, e := wire.Decode([]byte(f))
		if e != nil {
			out, _ := wire.Encode(e)
			fmt.Printf("%s\n", out)
			continue
		}
		switch req := req.(type) {
		case *wire.Decide:
			fmt.Printf("decide %s: %s %s\n", req.RequestID(), req.ToolName, req.ToolInput)
		}
	}
	// Output:
	// decide 3: Read {"file_path":"/srv/app/notes.txt"}
	// {"type":"error","id":"4","code":"duplicate_key","message":"decide: keys \"tool_name\" and \"Tool_Name\" differ only in case"}
}

// A connection's writer encodes each reply into one text frame.
func ExampleEncode() {
	out, err := wire.Encode(wire.Decision{
		ID:             "3",
		Decision:       wire.Allow,
		Reason:         "Read of /srv/app/notes.txt is inside the workspace",
		Rule:           "host_fs.inside_workspace",
		DecisionID:     "d_1",
		PolicyRevision: "sha256:4f1c",
		ToolUseID:      "toolu_01",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s\n", out)
	// Output:
	// {"type":"decision","id":"3","decision":"allow","reason":"Read of /srv/app/notes.txt is inside the workspace","rule":"host_fs.inside_workspace","decision_id":"d_1","policy_revision":"sha256:4f1c","tool_use_id":"toolu_01"}
}
