package toolwrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

func TestGenerateIsDeterministicAndHashed(t *testing.T) {
	t.Parallel()
	a, err := toolwrap.Generate(servers())
	if err != nil {
		t.Fatal(err)
	}
	// The same servers, in another order, with their tools in another order.
	shuffled := servers()
	slices.Reverse(shuffled)
	for i := range shuffled {
		slices.Reverse(shuffled[i].Tools)
	}
	b, err := toolwrap.Generate(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for p := range a {
		if !bytes.Equal(a[p], b[p]) {
			t.Errorf("%s differs between two runs on the same servers", p)
		}
	}
	if toolwrap.Hash(a) != toolwrap.Hash(b) {
		t.Errorf("the hash differs between two runs on the same servers")
	}
	changed := servers()
	changed[0].Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"page":{"type":"string"}}}`)
	c, err := toolwrap.Generate(changed)
	if err != nil {
		t.Fatal(err)
	}
	if toolwrap.Hash(c) == toolwrap.Hash(a) {
		t.Errorf("a changed schema kept the hash")
	}
	// A file's content cannot move into its path, or the other way round.
	if toolwrap.Hash(map[string][]byte{"ab": []byte("c")}) == toolwrap.Hash(map[string][]byte{"a": []byte("bc")}) {
		t.Errorf("the hash does not separate paths from contents")
	}
}

func TestGenerateWritesOnlyTheToolsGiven(t *testing.T) {
	t.Parallel()
	ss := servers()[:1]
	ss[0].Tools = ss[0].Tools[2:3] // update only
	files, err := toolwrap.Generate(ss)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{
		"node/gatekeeper-tools/index.d.ts", "node/gatekeeper-tools/index.js",
		"node/gatekeeper-tools/records.d.ts", "node/gatekeeper-tools/records.js",
		"python/gatekeeper_tools/__init__.py", "python/gatekeeper_tools/records.py",
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("files %v, want %v", paths, want)
	}
	for p, b := range files {
		for _, absent := range []string{"get-records", "get_records", "lookup", "evil"} {
			if bytes.Contains(b, []byte(absent)) {
				t.Errorf("%s names %q, a tool or server it was not given", p, absent)
			}
		}
	}
	if !bytes.Contains(files["python/gatekeeper_tools/records.py"], []byte("def update(")) {
		t.Errorf("records.py has no update function")
	}
}

func TestGenerateRefuses(t *testing.T) {
	t.Parallel()
	tool := []runner.ToolInfo{{Name: "t"}}
	for _, c := range []struct {
		name    string
		servers []runner.ServerTools
		want    string
	}{
		{"an upper-case server name", []runner.ServerTools{{Name: "Records", Tools: tool}}, `server "Records": the name must match`},
		{"a server name with a dot", []runner.ServerTools{{Name: "a.b", Tools: tool}}, `server "a.b": the name must match`},
		{"a server name that is a path", []runner.ServerTools{{Name: "../x", Tools: tool}}, `server "../x": the name must match`},
		{"an empty server name", []runner.ServerTools{{Name: "", Tools: tool}}, `server "": the name must match`},
		{"a server name of 33 bytes", []runner.ServerTools{{Name: strings.Repeat("a", 33), Tools: tool}}, `the name must match`},
		{"a server given twice", []runner.ServerTools{{Name: "a", Tools: tool}, {Name: "a", Tools: tool}}, `server "a": listed twice`},
		{"a tool given twice", []runner.ServerTools{{Name: "a", Tools: []runner.ToolInfo{{Name: "t"}, {Name: "t"}}}}, `server "a": tool "t" listed twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			files, err := toolwrap.Generate(c.servers)
			if err == nil || !strings.Contains(err.Error(), c.want) || files != nil {
				t.Fatalf("Generate: %v, %d files; want an error with %q and no files", err, len(files), c.want)
			}
		})
	}
}

// TestTypesCheck typechecks testdata/usage.ts against the generated .d.ts
// with the TypeScript of ts-client (make build runs npm ci there).
func TestTypesCheck(t *testing.T) {
	t.Parallel()
	tsc, err := filepath.Abs("../../ts-client/node_modules/typescript/bin/tsc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("TypeScript is needed (run npm ci in ts-client): %v", err)
	}
	node := lookPath(t, "node")
	tree := writeTree(t, servers())
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tree, "node", "gatekeeper-tools"), filepath.Join(dir, "node_modules", "gatekeeper-tools")); err != nil {
		t.Fatal(err)
	}
	usage, err := os.ReadFile("testdata/usage.ts")
	if err != nil {
		t.Fatal(err)
	}
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "ES2022", "lib": ["ES2022"], "module": "commonjs",
		"moduleResolution": "node", "esModuleInterop": true, "skipLibCheck": false, "types": []}, "files": ["usage.ts"]}`
	for name, b := range map[string][]byte{"usage.ts": usage, "tsconfig.json": []byte(config)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, tsc, "--noEmit", "-p", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}
