package wire

import (
	"strings"
	"testing"
)

// typicalDecide is a decide frame as the TypeScript client sends it for a
// Bash call (265 bytes).
const typicalDecide = `{"type":"decide","id":"c0a8f3e2-1","query_id":"q_6b0c2f9d4a1e","event":"PreToolUse","tool_name":"Bash","tool_input":{"command":"grep -rn \"TODO\" src/ | head -n 20","description":"Find TODO comments","timeout":120000},"tool_use_id":"toolu_01A9xQvH3dRz7kLmN2pBtY4c"}`

func BenchmarkDecodeDecide(b *testing.B) {
	benchmarkDecode(b, typicalDecide)
}

// BenchmarkDecodeDecideLargeInput decodes a decide frame for a Write of
// 64 KiB of text.
func BenchmarkDecodeDecideLargeInput(b *testing.B) {
	content := strings.Repeat(`line of text with \"quotes\" and \\ backslashes\n`, 64<<10/50)
	benchmarkDecode(b, `{"type":"decide","id":"7","query_id":"q_1","event":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/srv/app/out.txt","content":"`+content+`"},"tool_use_id":"toolu_02"}`)
}

func BenchmarkDecodeRun(b *testing.B) {
	benchmarkDecode(b, frame(validRun))
}

func benchmarkDecode(b *testing.B, frame string) {
	data := []byte(frame)
	if _, e := Decode(data); e != nil {
		b.Fatal(e)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		Decode(data)
	}
}

func BenchmarkEncodeDecision(b *testing.B) {
	d := Decision{ID: "c0a8f3e2-1", Decision: Allow, Reason: "Bash grep is read-only", Rule: "bash.read_only", DecisionID: "d_0d3e5a", PolicyRevision: "sha256:4f1c9e", ToolUseID: "toolu_01A9xQvH3dRz7kLmN2pBtY4c"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(d); err != nil {
			b.Fatal(err)
		}
	}
}
