package mcpservers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

// stdioBin is the stdio test server, built once by TestMain.
var stdioBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv("GK_MCP_SIDECAR_BIN"); bin != "" {
		sidecarChild(bin)
		return
	}
	dir, err := os.MkdirTemp("", "mcptest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// A variable of the sidecar's own process, which no server may inherit.
	os.Setenv("GK_SIDECAR_ONLY", "sidecar-process-secret")
	stdioBin, err = mcptest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer is a slog sink tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type env map[string]string

func (e env) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

// start returns Servers for configs, closed at the test's end, and its log.
func start(t *testing.T, opts mcpservers.Options, configs ...mcpservers.Config) (*mcpservers.Servers, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := mcpservers.New(configs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// callResult is the part of an MCP CallToolResult tests read.
type callResult struct {
	Content []struct {
		Type, Text string
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func call(t *testing.T, s *mcpservers.Servers, server, tool, args string) callResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	raw, err := s.CallTool(ctx, server, tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s.%s(%s): %v", server, tool, args, err)
	}
	var r callResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s.%s: result %s: %v", server, tool, raw, err)
	}
	return r
}

func structured[T any](t *testing.T, r callResult) T {
	t.Helper()
	var v T
	if r.IsError || json.Unmarshal(r.StructuredContent, &v) != nil {
		t.Fatalf("no structured content: %+v", r)
	}
	return v
}

type page struct {
	Records []mcptest.Record
	Total   int
	More    bool
}

func TestListToolsOverStdioAndHTTP(t *testing.T) {
	t.Parallel()
	s, _ := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "crm", 500, nil), mcptest.HTTP(t, "billing", 500, nil))
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "billing" || list[1].Name != "crm" {
		t.Fatalf("servers = %+v", list)
	}
	for _, st := range list {
		if st.Err != nil {
			t.Fatalf("%s: %v", st.Name, st.Err)
		}
		var names []string
		tools := map[string]runner.ToolInfo{}
		for _, tool := range st.Tools {
			names = append(names, tool.Name)
			tools[tool.Name] = tool
		}
		if got := strings.Join(names, ","); got != "big,crash,delete_record,fail,hang,lookup,media,pid,records,secret_digest,sleep,spawn" {
			t.Errorf("%s: tools = %s", st.Name, got)
		}
		rec := tools["records"]
		if rec.ReadOnly == nil || !*rec.ReadOnly || rec.OpenWorld == nil || *rec.OpenWorld || rec.Destructive != nil || rec.Title != "List records" {
			t.Errorf("%s: records annotations = ro %v ow %v d %v %q", st.Name, rec.ReadOnly, rec.OpenWorld, rec.Destructive, rec.Title)
		}
		if !strings.Contains(string(rec.InputSchema), `"page"`) || !strings.Contains(string(rec.OutputSchema), `"records"`) || !strings.Contains(string(rec.OutputSchema), `"more"`) {
			t.Errorf("%s: records schemas = %s / %s", st.Name, rec.InputSchema, rec.OutputSchema)
		}
		del := tools["delete_record"]
		if del.ReadOnly == nil || *del.ReadOnly || del.Destructive == nil || !*del.Destructive {
			t.Errorf("%s: delete_record annotations = ro %v d %v", st.Name, del.ReadOnly, del.Destructive)
		}
		if sl := tools["sleep"]; sl.ReadOnly != nil || sl.Destructive != nil || sl.OpenWorld != nil || sl.OutputSchema != nil {
			t.Errorf("%s: sleep states hints or an output schema: %+v", st.Name, sl)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(st.Hash) {
			t.Errorf("%s: hash = %q", st.Name, st.Hash)
		}
	}
	if list[0].Hash == list[1].Hash {
		t.Error("two servers of different names have one schema hash")
	}
	again, err := s.List(t.Context())
	if err != nil || again[0].Hash != list[0].Hash || again[1].Hash != list[1].Hash {
		t.Errorf("hashes changed between two lists: %v", err)
	}

	info, ok, err := s.Tool(t.Context(), "crm", "lookup")
	if err != nil || !ok || info.Name != "lookup" || info.Idempotent == nil || !*info.Idempotent {
		t.Errorf("Tool(crm, lookup) = %+v, %v, %v", info, ok, err)
	}
	for _, c := range [][2]string{{"crm", "no_such_tool"}, {"no_such_server", "lookup"}} {
		if _, ok, err := s.Tool(t.Context(), c[0], c[1]); ok || err != nil {
			t.Errorf("Tool(%s, %s) = ok %v, err %v; want not found", c[0], c[1], ok, err)
		}
	}
}

// TestSchemaHashIsCanonical: the same tools served by the same name over
// both transports hash the same.
func TestSchemaHashIsCanonical(t *testing.T) {
	t.Parallel()
	a, _ := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "same", 5, nil))
	h := mcptest.HTTP(t, "same", 5, nil)
	h.Description = "test records over stdio"
	b, _ := start(t, mcpservers.Options{}, h)
	la, errA := a.List(t.Context())
	lb, errB := b.List(t.Context())
	if errA != nil || errB != nil || la[0].Err != nil || lb[0].Err != nil {
		t.Fatal(errA, errB, la[0].Err, lb[0].Err)
	}
	if la[0].Hash != lb[0].Hash {
		t.Errorf("stdio hash %s != HTTP hash %s", la[0].Hash, lb[0].Hash)
	}
}

func TestCallPagesAndLooksUp(t *testing.T) {
	t.Parallel()
	s, _ := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "crm", 500, nil), mcptest.HTTP(t, "billing", 500, nil))
	for _, server := range []string{"crm", "billing"} {
		seen := 0
		for p := 1; ; p++ {
			got := structured[page](t, call(t, s, server, "records", fmt.Sprintf(`{"page": %d, "size": 100}`, p)))
			for i, r := range got.Records {
				if want := mcptest.MakeRecord(server, seen+i+1); r != want {
					t.Fatalf("%s page %d record %d = %+v, want %+v", server, p, i, r, want)
				}
			}
			seen += len(got.Records)
			if !got.More {
				break
			}
		}
		if seen != 500 {
			t.Errorf("%s: paged through %d records, want 500", server, seen)
		}
		if r := structured[mcptest.Record](t, call(t, s, server, "lookup", `{"id": 42}`)); r != mcptest.MakeRecord(server, 42) {
			t.Errorf("%s: lookup 42 = %+v", server, r)
		}
		if r := call(t, s, server, "fail", `{}`); !r.IsError || !strings.Contains(r.Content[0].Text, "always fails") {
			t.Errorf("%s: fail = %+v, want a tool error", server, r)
		}
		if r := call(t, s, server, "big", `{"bytes": 4000000}`); len(r.Content) != 1 || len(r.Content[0].Text) != 4000000 {
			t.Errorf("%s: big returned %d content items", server, len(r.Content))
		}
		checkMedia(t, s, server)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := s.CallTool(ctx, server, "no_such_tool", json.RawMessage(`{}`))
		cancel()
		if err == nil || !strings.Contains(err.Error(), `mcp server "`+server+`"`) || errors.Is(err, mcpservers.ErrUnavailable) {
			t.Errorf("%s: unknown tool: %v, want the server's own error", server, err)
		}
	}
	if _, err := s.CallTool(t.Context(), "nope", "lookup", nil); !errors.Is(err, mcpservers.ErrUnknownServer) {
		t.Errorf("unknown server: %v", err)
	}
}

// checkMedia checks that a result's items that are not text reach the
// caller whole, as the server sent them: the image's and the blob's bytes
// (in base64, as MCP carries them; the wrappers write them to files), the
// text resource, and the link, which the client does not fetch.
func checkMedia(t *testing.T, s *mcpservers.Servers, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	raw, err := s.CallTool(ctx, server, "media", json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("%s: media: %v", server, err)
	}
	var r struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) != 5 {
		t.Fatalf("%s: media returned %s (%v), want 5 items", server, raw, err)
	}
	b64 := base64.StdEncoding.EncodeToString
	res := func(i int) map[string]any { m, _ := r.Content[i]["resource"].(map[string]any); return m }
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"the image's type", r.Content[1]["type"], "image"},
		{"the image's bytes", r.Content[1]["data"], b64(mcptest.MediaPNG)},
		{"the image's MIME type", r.Content[1]["mimeType"], "image/png"},
		{"the blob's bytes", res(2)["blob"], b64(mcptest.MediaPDF)},
		{"the blob's MIME type", res(2)["mimeType"], "application/pdf"},
		{"the text resource", res(3)["text"], "notes of " + server},
		{"the link's type", r.Content[4]["type"], "resource_link"},
		{"the link's URI", r.Content[4]["uri"], "https://files.example/" + server + ".csv"},
	} {
		if c.got != c.want {
			t.Errorf("%s: media: %s is %v, want %v", server, c.what, c.got, c.want)
		}
	}
}

// TestCredentialsReachOnlyTheirServer: values from the sidecar's
// environment and from files reach the server they are configured for; the
// sidecar's other variables do not; no value is logged.
func TestCredentialsReachOnlyTheirServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("file-secret-7f3a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sidecar := env{"GK_TEST_TOKEN": "env-secret-91c2", "ANTHROPIC_API_KEY": "sidecar-own-secret", "PATH": os.Getenv("PATH")}
	s, logs := start(t, mcpservers.Options{LookupEnv: sidecar.lookup},
		mcptest.Stdio(stdioBin, "crm", 5, map[string]mcpservers.Value{
			"API_TOKEN":   {FromEnv: "GK_TEST_TOKEN"},
			"DB_PASSWORD": {FromFile: file},
			"LOG_LEVEL":   {Literal: "debug"},
		}),
		mcptest.HTTP(t, "billing", 5, map[string]mcpservers.Value{
			"Authorization": {FromFile: file},
			"X-Api-Key":     {FromEnv: "GK_TEST_TOKEN"},
			"X-Tenant":      {Literal: "acme"},
		}))
	type digest struct {
		Present bool
		SHA256  string
	}
	for _, c := range []struct {
		server, name string
		want         string // "" for absent
	}{
		{"crm", "API_TOKEN", "env-secret-91c2"},
		{"crm", "DB_PASSWORD", "file-secret-7f3a"},
		{"crm", "LOG_LEVEL", "debug"},
		{"crm", "ANTHROPIC_API_KEY", ""},
		{"crm", "GK_TEST_TOKEN", ""},
		{"crm", "GK_SIDECAR_ONLY", ""},
		{"billing", "Authorization", "file-secret-7f3a"},
		{"billing", "X-Api-Key", "env-secret-91c2"},
		{"billing", "X-Tenant", "acme"},
		{"billing", "Anthropic-Api-Key", ""},
	} {
		got := structured[digest](t, call(t, s, c.server, "secret_digest", fmt.Sprintf(`{"name": %q}`, c.name)))
		switch {
		case c.want == "" && got.Present:
			t.Errorf("%s sees %s, which it was not given", c.server, c.name)
		case c.want != "" && (!got.Present || got.SHA256 != mcptest.Digest(c.want)):
			t.Errorf("%s: %s = %+v, want the digest of the configured value", c.server, c.name, got)
		}
	}
	for _, secret := range []string{"env-secret-91c2", "file-secret-7f3a", "sidecar-own-secret", "sidecar-process-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret is in the log:\n%s", logs)
		}
	}
}

// TestMissingCredentialFailsOnlyItsServer: a variable that is not set
// fails its server's calls with an error that says it could not be
// started, whose Cause (for the log and the audit line) names the
// variable; the other server answers.
func TestMissingCredentialFailsOnlyItsServer(t *testing.T) {
	t.Parallel()
	s, _ := start(t, mcpservers.Options{LookupEnv: env{}.lookup},
		mcptest.Stdio(stdioBin, "crm", 5, map[string]mcpservers.Value{"API_TOKEN": {FromEnv: "GK_UNSET"}}),
		mcptest.HTTP(t, "billing", 5, nil))
	_, err := s.CallTool(t.Context(), "crm", "lookup", json.RawMessage(`{"id": 1}`))
	if !errors.Is(err, mcpservers.ErrUnavailable) || !strings.Contains(err.Error(), "could not be started") || strings.Contains(err.Error(), "GK_UNSET") ||
		!strings.Contains(runner.ServerErrorDetail(err), "env API_TOKEN: environment variable GK_UNSET is not set") {
		t.Errorf("crm: %v (detail %q)", err, runner.ServerErrorDetail(err))
	}
	if r := structured[mcptest.Record](t, call(t, s, "billing", "lookup", `{"id": 1}`)); r.ID != 1 {
		t.Errorf("billing: %+v", r)
	}
	errs := s.Connect(t.Context())
	if errs["crm"] == nil || errs["billing"] != nil {
		t.Errorf("Connect = %v", errs)
	}
}

// TestHangingCallHoldsUpNothingElse: while a call hangs, the same server
// and another answer; the hanging call ends with its context.
func TestHangingCallHoldsUpNothingElse(t *testing.T) {
	t.Parallel()
	for _, hanging := range []string{"crm", "billing"} {
		t.Run(hanging, func(t *testing.T) {
			t.Parallel()
			s, _ := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "crm", 5, nil), mcptest.HTTP(t, "billing", 5, nil))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := s.CallTool(ctx, hanging, "hang", nil)
				done <- err
			}()
			for _, server := range []string{"crm", "billing"} {
				if r := structured[mcptest.Record](t, call(t, s, server, "lookup", `{"id": 3}`)); r.ID != 3 {
					t.Errorf("%s: %+v", server, r)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("the hanging call returned: %v", err)
			default:
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `mcp server "`+hanging+`"`) {
				t.Errorf("hanging call: %v, want context.Canceled naming the server", err)
			}
			// The session survives a call abandoned by its caller.
			if r := structured[mcptest.Record](t, call(t, s, hanging, "lookup", `{"id": 4}`)); r.ID != 4 {
				t.Errorf("after the hang: %+v", r)
			}
		})
	}
}

// TestCallWithoutDeadlineGetsOne: a call whose context has no deadline
// ends after Options.CallTimeout.
func TestCallWithoutDeadlineGetsOne(t *testing.T) {
	t.Parallel()
	s, _ := start(t, mcpservers.Options{CallTimeout: 300 * time.Millisecond}, mcptest.Stdio(stdioBin, "crm", 5, nil))
	call(t, s, "crm", "pid", `{}`) // connected, so the timeout is the call's
	_, err := s.CallTool(context.Background(), "crm", "hang", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang without a deadline: %v", err)
	}
}

type pidOut struct{ PID int }

// TestCrashedServerRestarts: a stdio server that exits mid-call fails that
// call with an error naming it; the next call starts it again; both are
// logged, and the dead process is reaped.
func TestCrashedServerRestarts(t *testing.T) {
	t.Parallel()
	s, logs := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "crm", 5, nil), mcptest.HTTP(t, "billing", 5, nil))
	first := structured[pidOut](t, call(t, s, "crm", "pid", `{}`)).PID
	_, err := s.CallTool(t.Context(), "crm", "crash", nil)
	if !errors.Is(err, mcpservers.ErrUnavailable) || !strings.Contains(err.Error(), `mcp server "crm"`) || !strings.Contains(err.Error(), "during crash") {
		t.Fatalf("crash: %v, want ErrUnavailable naming the server and tool", err)
	}
	second := structured[pidOut](t, call(t, s, "crm", "pid", `{}`)).PID
	if second == first {
		t.Fatalf("the same process (%d) answered after the crash", first)
	}
	waitGone(t, first)
	if r := structured[mcptest.Record](t, call(t, s, "billing", "lookup", `{"id": 2}`)); r.ID != 2 {
		t.Errorf("billing: %+v", r)
	}
	log := logs.String()
	for _, want := range []string{`msg="mcp server disconnected" mcp_server=crm`, `msg="mcp server connected" mcp_server=crm transport=stdio tools=12 pid=` + fmt.Sprint(second) + ` restart=1`, "crash: exiting mid-call"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestDownServerFailsAlone: a server nothing listens for fails its own
// calls and is listed with its error; the other server answers.
func TestDownServerFailsAlone(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	s, logs := start(t, mcpservers.Options{},
		mcpservers.Config{Name: "gone", URL: deadURL},
		mcpservers.Config{Name: "nocmd", Command: []string{filepath.Join(t.TempDir(), "no-such-program")}},
		mcptest.Stdio(stdioBin, "crm", 5, nil))
	for _, server := range []string{"gone", "nocmd"} {
		if _, err := s.CallTool(t.Context(), server, "lookup", json.RawMessage(`{"id": 1}`)); !errors.Is(err, mcpservers.ErrUnavailable) || !strings.Contains(err.Error(), `mcp server "`+server+`"`) {
			t.Errorf("%s: %v", server, err)
		}
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list[0].Name != "crm" || list[0].Err != nil || len(list[0].Tools) != 12 || list[1].Err == nil || list[2].Err == nil {
		t.Errorf("list = %+v", list)
	}
	if !strings.Contains(logs.String(), `msg="mcp server connect failed" mcp_server=gone`) {
		t.Errorf("log:\n%s", logs)
	}
}

// slowStdio is the stdio test server named name that starts serving only
// once the file release returns exists (mcptestserver -wait-for).
func slowStdio(t *testing.T, name string) (mcpservers.Config, func()) {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "release")
	c := mcptest.Stdio(stdioBin, name, 5, nil)
	c.Command = append(c.Command, "-wait-for", gate)
	return c, func() {
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListDoesNotWaitForAConnectingServer: a listing whose ctx ends while
// one server is still starting returns the ready server's tools and that
// server marked unavailable, without failing; a call to the ready server
// is not held up meanwhile, and the slow server's connect goes on, so a
// later listing has its tools once it has started.
func TestListDoesNotWaitForAConnectingServer(t *testing.T) {
	t.Parallel()
	slow, release := slowStdio(t, "slow")
	s, _ := start(t, mcpservers.Options{}, mcptest.Stdio(stdioBin, "crm", 5, nil), slow)
	// crm is connected (and its tools cached) before the listing; slow
	// cannot be until the test releases it.
	if _, ok, err := s.Tool(t.Context(), "crm", "lookup"); !ok || err != nil {
		t.Fatalf("crm: lookup: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	list, err := s.List(ctx)
	cancel()
	if err != nil {
		t.Fatalf("List failed as a whole: %v", err)
	}
	if len(list) != 2 || list[0].Name != "crm" || list[0].Err != nil || len(list[0].Tools) != 12 {
		t.Fatalf("crm is not listed with its 12 tools: %+v", list)
	}
	if st := list[1]; st.Name != "slow" || !errors.Is(st.Err, mcpservers.ErrUnavailable) || !strings.Contains(st.Err.Error(), `mcp server "slow"`) ||
		!strings.Contains(st.Err.Error(), "still connecting") || len(st.Tools) != 0 {
		t.Fatalf("slow is not listed as unavailable, still connecting: %+v (err %v)", st, st.Err)
	}
	if r := call(t, s, "crm", "lookup", `{"id": 3}`); r.IsError {
		t.Errorf("a call to crm while slow connects failed: %+v", r)
	}
	release()
	// The connect that the first listing began has ConnectTimeout (30 s)
	// to finish; this bound only stops a broken test.
	giveUp := time.Now().Add(2 * mcpservers.DefaultConnectTimeout)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		list, err = s.List(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if list[1].Err == nil {
			break
		}
		if time.Now().After(giveUp) {
			t.Fatalf("slow never came up: %v", list[1].Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(list[1].Tools) != 12 || list[1].Hash == "" {
		t.Errorf("slow, once started, is listed as %+v", list[1])
	}
}

// TestRedirectCarriesNoCredentials: an HTTP server that redirects does not
// get the client to send its headers anywhere else.
func TestRedirectCarriesNoCredentials(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/mcp", http.StatusTemporaryRedirect))
	defer redirect.Close()
	s, _ := start(t, mcpservers.Options{}, mcpservers.Config{Name: "r", URL: redirect.URL, Headers: map[string]mcpservers.Value{"Authorization": {Literal: "Bearer-not-a-secret"}}})
	_, err := s.CallTool(t.Context(), "r", "lookup", nil)
	if !errors.Is(err, mcpservers.ErrUnavailable) {
		t.Errorf("call through a redirect: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the redirect target got %d requests (Authorization %q)", len(leaked), leaked)
	}
}

// TestCloseLeavesNoProcess: Close stops every stdio server and the
// processes it started; later calls fail with ErrClosed.
func TestCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	s, err := mcpservers.New([]mcpservers.Config{mcptest.Stdio(stdioBin, "a", 5, nil), mcptest.Stdio(stdioBin, "b", 5, nil)}, mcpservers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, server := range []string{"a", "b"} {
		pids = append(pids, structured[pidOut](t, call(t, s, server, "pid", `{}`)).PID)
		pids = append(pids, structured[pidOut](t, call(t, s, server, "spawn", `{}`)).PID)
	}
	// A call in flight at Close ends too.
	hung := make(chan error, 1)
	go func() {
		_, err := s.CallTool(context.Background(), "a", "hang", nil)
		hung <- err
	}()
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d is not running before Close", pid)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
	if err := <-hung; err == nil {
		t.Error("a call in flight at Close succeeded")
	}
	if _, err := s.CallTool(t.Context(), "a", "pid", nil); !errors.Is(err, mcpservers.ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
}

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitGone polls until pid is no longer running; a process of the test's
// own must also be reaped (no zombie left).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) && !ownZombie(pid) {
			return
		}
	}
	t.Errorf("process %d is still running (or an unreaped child)", pid)
}

// ownZombie reports whether pid is a zombie child of this process.
func ownZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	fields := strings.Fields(string(stat[i+2:]))
	return len(fields) > 1 && fields[0] == "Z" && fields[1] == fmt.Sprint(os.Getpid())
}

// TestOversizeResultFailsItsCall: a result past the bound
// (MaxResultBytes) fails its call, on both transports, with an error of
// Kind runner.ErrResultTooLarge that names the bound; it is not read to
// its end, and the server stays up in the same session: the stdio server
// is the same process, no session is dropped, and a result just within
// the bound still answers.
func TestOversizeResultFailsItsCall(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	s, logs := start(t, mcpservers.Options{MaxResultBytes: bound}, mcptest.Stdio(stdioBin, "crm", 5, nil), mcptest.HTTP(t, "billing", 5, nil))
	for _, server := range []string{"crm", "billing"} {
		pid := structured[pidOut](t, call(t, s, server, "pid", `{}`)).PID
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // making 50 MB takes the server long on a loaded machine
		_, err := s.CallTool(ctx, server, "big", json.RawMessage(`{"bytes": 50000000}`))
		cancel()
		if !errors.Is(err, runner.ErrResultTooLarge) || !strings.Contains(err.Error(), `mcp server "`+server+`"`) ||
			!strings.Contains(err.Error(), runner.RuleMaxResultBytes) || !strings.Contains(err.Error(), "big") {
			t.Errorf("%s: a 50 MB result: %v, want ErrResultTooLarge naming the server, the tool and %s", server, err, runner.RuleMaxResultBytes)
		}
		if r := call(t, s, server, "big", `{"bytes": 900000}`); len(r.Content) != 1 || len(r.Content[0].Text) != 900000 {
			t.Errorf("%s: a result within the bound: %d content blocks", server, len(r.Content))
		}
		if after := structured[pidOut](t, call(t, s, server, "pid", `{}`)).PID; after != pid {
			t.Errorf("%s: pid %d after the oversize result, %d before: the server was restarted", server, after, pid)
		}
	}
	log := logs.String()
	if strings.Contains(log, "mcp server disconnected") || strings.Count(log, "mcp server message larger than the bound") != 2 {
		t.Errorf("log: want two oversize answers and no session dropped:\n%s", log)
	}
}

// sidecarChild is the test binary run as a sidecar that TestServersDieWithTheSidecar
// kills: it connects a stdio server, keeps a call in flight, prints the
// server's pid, and waits to be killed.
func sidecarChild(bin string) {
	s, err := mcpservers.New([]mcpservers.Config{mcptest.Stdio(bin, "crm", 5, nil)}, mcpservers.Options{})
	if err == nil {
		var raw json.RawMessage
		if raw, err = s.CallTool(context.Background(), "crm", "pid", nil); err == nil {
			// A call in flight: the server does not end at its stdin's EOF.
			go s.CallTool(context.Background(), "crm", "hang", nil)
			fmt.Printf("%s\n", raw)
			select {}
		}
	}
	fmt.Println(err)
	os.Exit(1)
}

// TestServersDieWithTheSidecar: a stdio server does not outlive a sidecar
// that is killed without a chance to stop it.
func TestServersDieWithTheSidecar(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GK_MCP_SIDECAR_BIN="+stdioBin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	var r callResult
	if err != nil || json.Unmarshal([]byte(line), &r) != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("sidecar child: %q, %v", line, err)
	}
	pid := structured[pidOut](t, r).PID
	if !alive(pid) {
		t.Fatalf("server %d is not running", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(t, pid)
}
