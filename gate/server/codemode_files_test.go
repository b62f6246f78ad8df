package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// mediaProgram calls the media tool of the real MCP server through the
// wrappers and prints what each item became: a file (its kind, MIME type,
// size, directory and the sha256 of its bytes), text or a link; then
// whether call()'s whole result carries any base64 of the image.
const mediaProgram = `import base64, hashlib, json, os
import gatekeeper_tools as gk
from gatekeeper_tools import people
for i in people.media():
    if isinstance(i, str):
        print("text", i)
    elif i["type"] == "file":
        data = open(i["path"], "rb").read()
        print("file", i["kind"], i["mimeType"], i["size"], os.path.dirname(i["path"]), hashlib.sha256(data).hexdigest())
    else:
        print("link", i["uri"], i["name"], i["mimeType"])
whole = gk.call("people", "media", {})
png = [i for i in whole["content"] if i.get("kind") == "image"][0]
print("base64 in call()", base64.b64encode(open(png["path"], "rb").read()).decode() in json.dumps(whole))
`

// TestCodeModeResultsLandAsFiles: an image, an embedded blob and an
// embedded text resource that a real MCP server returns reach a program in
// a real sandbox as files under /tmp/gatekeeper-results holding their
// bytes, with their MIME types; a resource_link stays a link. And a call
// whose arguments the tool's schema refuses raises ToolCallBadRequest with
// the schema's short form.
func TestCodeModeResultsLandAsFiles(t *testing.T) {
	t.Parallel()
	bin, err := mcptest.Build(t.TempDir())
	must(t, err)
	h := startCodeMode(t, codeModeRego, `code_calls:
  callable:
    people: [media, records]
`, mcptest.Stdio(bin, "people", 10, nil))
	c := h.connect(t)
	res, out := runCode(t, c, c.open(""), "toolu_media", mediaProgram)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	file := func(kind, mime string, b []byte) string {
		return fmt.Sprintf("file %s %s %d /tmp/gatekeeper-results %s\n", kind, mime, len(b), sum(b))
	}
	want := "text the media of people\n" +
		file("image", "image/png", mcptest.MediaPNG) +
		file("resource", "application/pdf", mcptest.MediaPDF) +
		file("resource", "text/plain", []byte("notes of people")) +
		"link https://files.example/people.csv people.csv text/csv\n" +
		"base64 in call() False\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}

	// A call with arguments its schema refuses is refused before the
	// server, with the schema's short form.
	res, out = runCode(t, c, c.open(""), "toolu_bad_args", `import gatekeeper_tools as gk
from gatekeeper_tools import people
try:
    people.records(page="1", size=10)
except gk.ToolCallBadRequest as e:
    print(e.kind, e.rule, e.message.split("; it takes ")[-1])
`)
	if res["reason"] != "exited" || res["exit_code"] != float64(0) {
		t.Fatalf("run: %v\noutput: %s", res, out)
	}
	if want := "bad_request code_calls.bad_arguments {page: int, size: int}\n"; out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}
