package toolwrap_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

//go:embed testdata/program.py
var programPy []byte

//go:embed testdata/program.js
var programJS []byte

// barrierN is how many calls the programs keep in flight at once.
const barrierN = 8

// programOutput is what testdata/program.{py,js} print.
type programOutput struct {
	Page         map[string]any   `json:"page"`
	PageDefaults map[string]any   `json:"page_defaults"`
	Lookup       string           `json:"lookup"`
	Media        []any            `json:"media"`
	MediaBytes   []*string        `json:"media_bytes"`
	MediaBase64  bool             `json:"media_call_has_base64"`
	NotBase64    *string          `json:"not_base64"`
	Count        any              `json:"count"`
	Update       map[string]any   `json:"update"`
	AB           map[string]any   `json:"a_b"`
	Dict         map[string]any   `json:"dict"`
	Class        map[string]any   `json:"class_"`
	GetRecords   []map[string]any `json:"get_records"`
	AnyTool      map[string]any   `json:"any"`
	Constructor  any              `json:"constructor"`
	Then         map[string]any   `json:"then"`
	Imported     *bool            `json:"imported_not_thenable"`
	Modules      []map[string]any `json:"modules"`
	CallIsFunc   bool             `json:"call_is_function"`
	DirRecords   []string         `json:"dir_records"`
	Typed        *struct {
		Return     string            `json:"return"`
		Records    string            `json:"records"`
		Item       map[string]string `json:"item"`
		EvilKeysOK bool              `json:"evil_keys_ok"`
	} `json:"typed"`
	DirPackage   []string                  `json:"dir_package"`
	Servers      map[string]serverManifest `json:"servers"`
	DocKept      *bool                     `json:"doc_kept"`
	RequiredReq  *bool                     `json:"required_is_required"`
	PositionalNo *bool                     `json:"positional_refused"`
	Errors       map[string]*programError  `json:"errors"`
	Barrier      []int                     `json:"barrier"`
	Big          int                       `json:"big"`
	Closed       *string                   `json:"closed"`
	AfterClose   string                    `json:"after_close"`
}

type serverManifest struct {
	Module      string            `json:"module"`
	Description string            `json:"description"`
	Tools       map[string]string `json:"tools"`
}

type programError struct {
	Class     string `json:"class"`
	Kind      string `json:"kind"`
	Rule      string `json:"rule"`
	Message   string `json:"message"`
	IsDenied  bool   `json:"is_denied"`
	IsLimit   bool   `json:"is_limit"`
	HasResult bool   `json:"has_result"`
}

// runProgram runs argv (the program's interpreter and file) with the
// environment a sandboxed program has, and returns its stdout.
func runProgram(t *testing.T, argv []string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\nstdout: %s\nstderr: %s", argv, err, stdout.Bytes(), stderr.Bytes())
	}
	if bytes.Contains(stdout.Bytes(), []byte("PWNED")) || bytes.Contains(stderr.Bytes(), []byte("PWNED")) {
		t.Fatalf("text from a schema ran as code:\nstdout: %s\nstderr: %s", stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// checkProgram checks what testdata/program.{py,js} printed, and what the
// bridge received from it.
func checkProgram(t *testing.T, lang string, b *bridge, stdout []byte) {
	t.Helper()
	var out programOutput
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("program output %q: %v", stdout, err)
	}
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	// Arguments go exactly as given, under their schema names, and an
	// optional parameter left out is not sent.
	for _, c := range []struct {
		server, tool string
		want         []string
	}{
		{"records", "get-records", []string{`{"page":2,"size":10}`, `{"page":1}`}},
		{"records", "lookup", []string{`{"id":"c-7"}`, `{"id":"media"}`, `{"id":"media"}`, `{"id":"not-base64"}`, `{"id":"again"}`}},
		{"records", "count", []string{`{}`}},
		{"records", "update", []string{`{"record":{"id":"c-7","fields":{"name":"Ada"}},"tags":["a","b"],"dry_run":false}`}},
		{"evil", "a.b", []string{`{"not an identifier":"x","from":1,"_args":"y","_gk":"z","page-size":3,"page_size":4,"9lives":"*/ x /*"}`}},
		{"evil", "dict", []string{`{"str":"s"}`}},
		{"evil", "class", []string{`{"x":1}`}},
		{"evil", "get-records", []string{`{"x":1}`}},
		{"evil", "get_records", []string{`{"x":2}`}},
		{"evil", "Any", []string{`{"free":"form","n":1}`}},
		{"evil", "constructor", []string{`{}`}},
		{"evil", "then", []string{`{}`}},
		{"class", "ping", []string{`{}`}},
		{"call", "ping", []string{`{}`}},
		{"json", "ping", []string{`{}`}},
	} {
		got := b.sent(c.server, c.tool)
		if len(got) != len(c.want) {
			t.Errorf("%s: %s/%s got %d calls %v, want %v", lang, c.server, c.tool, len(got), got, c.want)
			continue
		}
		for i := range got {
			if !sameJSON(t, got[i], c.want[i]) {
				t.Errorf("%s: %s/%s call %d sent %s, want %s", lang, c.server, c.tool, i+1, got[i], c.want[i])
			}
		}
	}

	if strings.HasPrefix(lang, "node") && (out.Imported == nil || !*out.Imported) {
		t.Errorf("%s: import() of a server module did not give the module: %v", lang, out.Imported)
	}
	if strings.HasPrefix(lang, "python") {
		for name, v := range map[string]*bool{"the hostile description survives as the docstring": out.DocKept,
			"a required parameter is required": out.RequiredReq, "a positional argument is refused": out.PositionalNo} {
			if v == nil || !*v {
				t.Errorf("%s: %s: %v", lang, name, v)
			}
		}
	}

	// Structured results where the tool declares an output schema, text otherwise.
	if got := j(out.Page); got != `{"next_page":3,"records":[{"id":"r1","name":"Ada"}]}` {
		t.Errorf("%s: get_records returned %s, want its structuredContent", lang, got)
	}
	if got := j(out.PageDefaults); got != `{"next_page":2,"records":[{"id":"r1","name":"Ada"}]}` {
		t.Errorf("%s: get_records(page=1) returned %s", lang, got)
	}
	if out.Lookup != "Ada Lovelace\nLondon" {
		t.Errorf("%s: lookup returned %q, want its text items joined by a newline", lang, out.Lookup)
	}
	checkMedia(t, lang, out, b.results)
	if j(out.Count) != "42" {
		t.Errorf("%s: count (output schema, text only) returned %v, want 42 read from its text", lang, j(out.Count))
	}
	if got := j(out.Update); got != `{"dry_run":false,"record":{"fields":{"name":"Ada"},"id":"c-7"},"tags":["a","b"]}` {
		t.Errorf("%s: update returned %s", lang, got)
	}
	if j(out.Constructor) != "{}" {
		t.Errorf("%s: constructor_ returned %s, want {}", lang, j(out.Constructor))
	}
	if len(out.Modules) != 3 || !out.CallIsFunc {
		t.Errorf("%s: modules %v, call is a function: %v", lang, out.Modules, out.CallIsFunc)
	}

	// Typed results (Python): TypedDicts from the output schema.
	if strings.HasPrefix(lang, "python") {
		ty := out.Typed
		switch {
		case ty == nil:
			t.Errorf("%s: no typed results reported", lang)
		case ty.Return != "GetRecordsOutput" || ty.Records != "list[gatekeeper_tools.records.GetRecordsOutputRecordsItem]":
			t.Errorf("%s: get_records returns %s with records %s, want GetRecordsOutput of GetRecordsOutputRecordsItem", lang, ty.Return, ty.Records)
		case !reflect.DeepEqual(ty.Item, map[string]string{"id": "<class 'str'>", "name": "<class 'str'>", "balance": "typing.NotRequired[float]"}):
			t.Errorf("%s: a record is typed %s, want id and name str and balance NotRequired[float]", lang, j(ty.Item))
		case !ty.EvilKeysOK:
			t.Errorf("%s: the hostile output schema's TypedDict does not have the hostile key as its one key", lang)
		}
	}

	// A module shows its tools only, the package its public names only.
	if got := strings.Join(out.DirRecords, ","); got != "count,get_records,lookup,update" {
		t.Errorf("%s: the records module shows %s, want its tools only", lang, got)
	}
	if got := strings.Join(out.DirPackage, ","); got != "ToolCallBadRequest,ToolCallCancelled,ToolCallDenied,ToolCallError,ToolCallLimit,ToolCallTimeout,ToolServerError,call,servers" {
		t.Errorf("%s: the package shows %s, want its public names only", lang, got)
	}

	// servers() lists what is there.
	var names []string
	for n := range out.Servers {
		names = append(names, n)
	}
	if want := map[string]string{"records": "records", "evil": "evil", "class": "class_", "call": "call_", "index": "index_", "json": "json"}; len(out.Servers) != len(want) {
		t.Errorf("%s: servers() = %v", lang, names)
	} else {
		for n, m := range want {
			if out.Servers[n].Module != m {
				t.Errorf("%s: servers()[%q].module = %q, want %q", lang, n, out.Servers[n].Module, m)
			}
		}
	}
	if got := j(out.Servers["records"].Tools); got != `{"count":"count","get-records":"get_records","lookup":"lookup","update":"update"}` {
		t.Errorf("%s: servers()['records'].tools = %s", lang, got)
	}

	// Each error kind raises its class, with the rule.
	wantErrors := map[string]programError{
		"x-denied":      {Class: "ToolCallDenied", Kind: "denied", Rule: "deny_argument_value", Message: "the denied message", IsDenied: true},
		"x-limit":       {Class: "ToolCallLimit", Kind: "limit", Rule: "code_calls.max_calls", Message: "the limit message", IsLimit: true},
		"x-timeout":     {Class: "ToolCallTimeout", Kind: "timeout", Rule: "code_calls.timeout", Message: "the timeout message"},
		"x-server":      {Class: "ToolServerError", Kind: "server", Message: "the server message"},
		"x-cancelled":   {Class: "ToolCallCancelled", Kind: "cancelled", Message: "the cancelled message"},
		"x-bad-request": {Class: "ToolCallBadRequest", Kind: "bad_request", Message: "the bad_request message"},
		"x-novel":       {Class: "ToolCallError", Kind: "some_future_kind", Rule: "r", Message: "the some_future_kind message"},
		"x-tool-error":  {Class: "ToolCallError", Kind: "tool_error", Message: "no such customer", HasResult: true},
	}
	for tool, want := range wantErrors {
		got := out.Errors[tool]
		if got == nil || *got != want {
			t.Errorf("%s: %s raised %+v, want %+v", lang, tool, got, want)
		}
	}

	// Calls in flight at once, answered out of order, each get their own answer.
	want := make([]int, barrierN)
	for i := range want {
		want[i] = i
	}
	if !reflect.DeepEqual(out.Barrier, want) {
		t.Errorf("%s: concurrent calls got %v, want %v", lang, out.Barrier, want)
	}
	if out.Big != bigResult {
		t.Errorf("%s: a result of %d characters came back as %d", lang, bigResult, out.Big)
	}
	if out.Closed == nil || *out.Closed != "bridge" {
		t.Errorf("%s: a call on a connection the bridge closed raised %v, want kind bridge", lang, out.Closed)
	}
	if out.AfterClose != "Ada Lovelace\nLondon" {
		t.Errorf("%s: the call after the bridge closed the connection returned %q", lang, out.AfterClose)
	}
	b.mu.Lock()
	conns := b.conns
	b.mu.Unlock()
	if conns != 2 {
		t.Errorf("%s: %d connections, want 2 (one shared by every call, one after the bridge closed it)", lang, conns)
	}
}

// checkMedia checks what lookup(id="media") returned: its items in order,
// each image, audio and embedded resource as a file under the results
// directory holding its decoded bytes, the link as the server sent it.
func checkMedia(t *testing.T, lang string, out programOutput, dir string) {
	t.Helper()
	if len(out.Media) != 7 || len(out.MediaBytes) != 7 {
		t.Fatalf("%s: lookup(media) returned %v, want its 7 items", lang, out.Media)
	}
	wantFiles := []struct {
		i               int
		kind, mime, ext string
		hex, uri        string
	}{
		{1, "image", "image/png", ".png", "89504e470d0a1a0a", ""},
		{2, "audio", "audio/wav", ".wav", "52494646", ""},
		{3, "resource", "application/pdf", ".pdf", "255044462d31", "file:///../../etc/passwd"},
		{4, "resource", "text/plain", ".txt", hex.EncodeToString([]byte("notes of c-7")), "crm://c-7/notes"},
	}
	for _, w := range wantFiles {
		item, _ := out.Media[w.i].(map[string]any)
		path, _ := item["path"].(string)
		if item["type"] != "file" || item["kind"] != w.kind || item["mimeType"] != w.mime ||
			item["size"] != float64(len(w.hex)/2) || (w.uri != "" && item["uri"] != w.uri) {
			t.Errorf("%s: item %d is %v, want a %s file of %s, %d bytes", lang, w.i, item, w.kind, w.mime, len(w.hex)/2)
		}
		if filepath.Dir(path) != dir || !strings.HasSuffix(path, w.ext) {
			t.Errorf("%s: item %d was written to %q, want a file of its own under the results directory ending %s", lang, w.i, path, w.ext)
		}
		if got := out.MediaBytes[w.i]; got == nil || *got != w.hex {
			t.Errorf("%s: item %d's file holds %v, want %s", lang, w.i, got, w.hex)
		}
		if _, has := item["data"]; has {
			t.Errorf("%s: item %d still carries its base64", lang, w.i)
		}
	}
	if out.Media[0] != "Ada" || out.Media[6] != "London" {
		t.Errorf("%s: the text items came back as %v, %v", lang, out.Media[0], out.Media[6])
	}
	if got, _ := json.Marshal(out.Media[5]); string(got) != `{"mimeType":"text/csv","name":"c-7.csv","type":"resource_link","uri":"https://files.example/c-7.csv"}` {
		t.Errorf("%s: the resource_link came back as %s, want it as the server sent it", lang, got)
	}
	if out.MediaBase64 {
		t.Errorf("%s: call() returned the base64 of the image", lang)
	}
	if out.NotBase64 == nil || *out.NotBase64 != "server" {
		t.Errorf("%s: an image whose data is not base64 raised %v, want kind server", lang, out.NotBase64)
	}
}

func TestPythonWrappersAgainstABridge(t *testing.T) {
	t.Parallel()
	python := lookPath(t, "python3")
	dir := writeTree(t, servers())
	b := serveBridge(t, dir, barrierN)
	prog := filepath.Join(t.TempDir(), "main.py")
	if err := os.WriteFile(prog, programPy, 0o644); err != nil {
		t.Fatal(err)
	}
	b.results = filepath.Join(t.TempDir(), "results")
	stdout := runProgram(t, []string{python, "-B", prog}, "GATEKEEPER_TOOLS="+dir, "PYTHONPATH="+filepath.Join(dir, "python"), "GATEKEEPER_RESULTS="+b.results,
		"HOSTILE="+jsonString(hostile), "BARRIER="+strconv.Itoa(barrierN))
	checkProgram(t, "python", b, stdout)
}

func TestNodeWrappersAgainstABridge(t *testing.T) {
	t.Parallel()
	node := lookPath(t, "node")
	dir := writeTree(t, servers())
	b := serveBridge(t, dir, barrierN)
	prog := filepath.Join(t.TempDir(), "main.js")
	if err := os.WriteFile(prog, programJS, 0o644); err != nil {
		t.Fatal(err)
	}
	b.results = filepath.Join(t.TempDir(), "results")
	stdout := runProgram(t, []string{node, prog}, "GATEKEEPER_TOOLS="+dir, "NODE_PATH="+filepath.Join(dir, "node"), "GATEKEEPER_RESULTS="+b.results,
		"BARRIER="+strconv.Itoa(barrierN))
	checkProgram(t, "node", b, stdout)
}

// lookPath finds an interpreter the tests need; without it they fail,
// they do not skip.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed to run the generated wrappers: %v", name, err)
	}
	return p
}

// TestNoBridge: in a run with no tools there is no bridge.sock; a call
// fails with kind bridge, and the program goes on and ends.
func TestNoBridge(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, servers())
	for _, c := range []struct{ lang, interpreter, env, code string }{
		{"python", "python3", "PYTHONPATH=" + filepath.Join(dir, "python"), `
import gatekeeper_tools as gk, gatekeeper_tools.records as r
try:
    r.lookup(id="x")
except gk.ToolCallError as e:
    print(type(e).__name__, e.kind, e.rule == "")
`},
		{"node", "node", "NODE_PATH=" + filepath.Join(dir, "node"), `
const gk = require('gatekeeper-tools'), r = require('gatekeeper-tools/records');
r.lookup({ id: 'x' }).catch((e) => console.log(e.constructor.name, e.kind, e.rule === '' ? 'True' : 'False'));
`},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			prog := filepath.Join(t.TempDir(), "main")
			if err := os.WriteFile(prog, []byte(c.code), 0o644); err != nil {
				t.Fatal(err)
			}
			out := runProgram(t, []string{lookPath(t, c.interpreter), prog}, "GATEKEEPER_TOOLS="+dir, c.env)
			if got := string(out); got != "ToolCallError bridge True\n" {
				t.Errorf("a call with no bridge: %q, want ToolCallError of kind bridge", got)
			}
		})
	}
}

// TestPythonWithoutJSON: in a Python without json (the minimal image
// profile's python3-minimal), importing the wrappers fails with an
// ImportError that says what is missing and which profile to use.
func TestPythonWithoutJSON(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, servers())
	prog := filepath.Join(t.TempDir(), "main.py")
	code := `import sys
sys.modules["json"] = None  # as if the interpreter had no json, as python3-minimal has not
try:
    import gatekeeper_tools.records
except ImportError as e:
    print(type(e).__name__, "|", e, "|", type(e.__cause__).__name__)
`
	if err := os.WriteFile(prog, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out := string(runProgram(t, []string{lookPath(t, "python3"), prog}, "GATEKEEPER_TOOLS="+dir, "PYTHONPATH="+filepath.Join(dir, "python")))
	for _, want := range []string{"ImportError | gatekeeper_tools needs Python's json module", "the minimal image profile", "python image profile", "| ModuleNotFoundError\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("importing the wrappers without json printed %q, want it to hold %q", out, want)
		}
	}
}
