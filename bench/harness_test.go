package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		want    Summary
	}{
		{"no samples summarize to zero", nil, Summary{}},
		{"one sample is every percentile", []time.Duration{2 * ms}, Summary{N: 1, P50: 2, P90: 2, P99: 2, Min: 2, Max: 2, Mean: 2}},
		{"percentiles are nearest-rank over unsorted input",
			[]time.Duration{10 * ms, 1 * ms, 9 * ms, 2 * ms, 8 * ms, 3 * ms, 7 * ms, 4 * ms, 6 * ms, 5 * ms},
			Summary{N: 10, P50: 5, P90: 9, P99: 10, Min: 1, Max: 10, Mean: 5.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Summarize(tc.samples); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDockerRunArgs(t *testing.T) {
	t.Parallel()
	var c Container
	c.Config.User, c.Config.Hostname, c.Config.WorkingDir, c.Config.Image = "65534:65534", "sandbox", "/workspace", "img:1"
	c.Config.Env = []string{"PATH=/bin", "HOME=/workspace"}
	c.Config.Entrypoint = []string{"/usr/bin/env", "-i", "PATH=/bin", "/bin/sh", "-c", "read -r h; exec \"$@\"", "gatekeeper-launcher", "30s"}
	h := &c.HostConfig
	h.NetworkMode, h.Runtime, h.IpcMode, h.ReadonlyRootfs = "none", "runsc", "private", true
	h.Tmpfs = map[string]string{"/workspace": "rw,size=1", "/tmp": "rw,size=2"}
	h.CapDrop, h.SecurityOpt, h.ShmSize = []string{"ALL"}, []string{"no-new-privileges:true"}, 16<<20
	init, pids := true, int64(320)
	h.Init, h.PidsLimit, h.LogConfig.Type = &init, &pids, "none"
	h.NanoCpus, h.Memory, h.MemorySwap = 1.5e9, 256<<20, 256<<20
	h.Ulimits = append(h.Ulimits, struct {
		Name       string
		Soft, Hard int64
	}{"nproc", 128, 128})

	args, err := DockerRunArgs(c, "bench", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	joined := " " + strings.Join(args, " ") + " "
	for _, want := range []string{
		"run --rm -i", "--runtime runsc", "--network none", "--read-only", "--init", "--pids-limit 320",
		"--cpus 1.5", "--memory 268435456", "--memory-swap 268435456", "--shm-size 16777216", "--ipc private",
		"--tmpfs /tmp:rw,size=2 --tmpfs /workspace:rw,size=1", "--cap-drop ALL", "--security-opt no-new-privileges:true",
		"--ulimit nproc=128:128", "--log-driver none", "--user 65534:65534", "--env HOME=/workspace",
		"--label gatekeeper.instance=bench", "--entrypoint /usr/bin/env img:1 -i PATH=/bin /bin/sh -c",
	} {
		if !strings.Contains(joined, " "+want+" ") {
			t.Errorf("docker run args lack %q: %v", want, args)
		}
	}
	if args[len(args)-1] != "30s" {
		t.Errorf("docker run args end with %q, want the container's whole command line", args[len(args)-1])
	}

	c.HostConfig.SecurityOpt = append(c.HostConfig.SecurityOpt, `seccomp={"defaultAction":"SCMP_ACT_ERRNO"}`)
	dir := t.TempDir()
	args, err = DockerRunArgs(c, "bench", dir)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "seccomp=") })
	if i < 1 || args[i-1] != "--security-opt" {
		t.Fatalf("docker run args lack the seccomp profile: %v", args)
	}
	file, _ := strings.CutPrefix(args[i], "seccomp=")
	if b, err := os.ReadFile(file); err != nil || string(b) != `{"defaultAction":"SCMP_ACT_ERRNO"}` || filepath.Dir(file) != dir {
		t.Errorf("the inline profile became %q in %s (%v), want the profile in a file of %s", b, file, err, dir)
	}

	c.HostConfig.Binds = []string{"/x:/deps:ro"}
	if _, err := DockerRunArgs(c, "bench", t.TempDir()); err == nil {
		t.Error("DockerRunArgs accepted a bind mount it does not replicate")
	}
}

func TestRunInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		entrypoint []string
		wantHeader string
	}{
		{"a launcher waiting for a header gets one", []string{"/bin/sh", "-c", "h=$(read -r h)"}, "20 python\n"},
		{"a launcher writing end marks gets their tag", []string{"/bin/sh", "-c", "h=$(read -r h); printf gatekeeper-end"}, "20 python " + RunTag + "\n"},
		{"the tar-only launcher gets the tar alone", []string{"/bin/sh", "-c", "tar -x -f -"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c Container
			c.Config.Entrypoint = tc.entrypoint
			in := RunInput(c, "print(1)", 10*time.Second, 65534)
			if !strings.HasPrefix(string(in), tc.wantHeader) || !strings.Contains(string(in), "main.py") {
				t.Errorf("RunInput = %.40q…, want header %q and main.py", in, tc.wantHeader)
			}
			if tc.wantHeader == "" && in[0] == '2' {
				t.Errorf("RunInput has a header: %.20q", in)
			}
		})
	}
}

func TestRenderChartIsWellFormedSVG(t *testing.T) {
	t.Parallel()
	samples := []time.Duration{100 * time.Microsecond, 150 * time.Microsecond, 2 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		panels []ChartPanel
	}{
		{"no panels", nil},
		{"a panel without samples", []ChartPanel{{Title: "empty", Series: []ChartSeries{{Name: "x", Color: "#000"}}}}},
		{"names are escaped", []ChartPanel{{Title: "a < b & c", Series: []ChartSeries{{Name: "<gk>", Color: "#000", Samples: samples}}, Marks: []ChartMark{{At: 1, Label: "1 ms"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dec := xml.NewDecoder(strings.NewReader(string(RenderChart("title", tc.panels))))
			for {
				_, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("the SVG is not well-formed XML: %v", err)
				}
			}
		})
	}
}

func TestParsePerfReport(t *testing.T) {
	t.Parallel()
	report := `# Samples: 2K of event 'cpu-clock:pppH'
#
    12.50%  [.] runtime.mallocgc
     7.50%  [.] github.com/open-policy-agent/opa/v1/topdown.(*eval).evalStep
     5.00%  [k] _raw_spin_unlock_irqrestore
     2.50%  [.] github.com/open-policy-agent/opa/v1/ast.(*Term).Equal
`
	p := parsePerfReport(strings.NewReader(report))
	want := map[string]float64{
		"Go runtime: GC, allocation, scheduler":              12.5,
		"OPA: Rego evaluation and value conversion":          10,
		"kernel (socket I/O, audit file writes, scheduling)": 5,
	}
	if p.Samples != 2000 {
		t.Errorf("Samples = %d, want 2000", p.Samples)
	}
	if len(p.Buckets) != len(want) {
		t.Errorf("Buckets = %+v, want %v", p.Buckets, want)
	}
	for _, b := range p.Buckets {
		if want[b.Name] != b.Percent {
			t.Errorf("bucket %q = %v%%, want %v%%", b.Name, b.Percent, want[b.Name])
		}
	}
}

func TestParseGCTrace(t *testing.T) {
	t.Parallel()
	log := `time=… level=WARN msg=x
gc 8 @0.077s 1%: 0.12+1.0+0.006 ms clock, 0.24+0.14/0.14/0.010+0.012 ms cpu, 32->37->12 MB, 37 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 9 @0.080s 2%: 1.0+2.6+0.007 ms clock, 2.0+0/2.0/0+0.014 ms cpu, 21->32->19 MB, 25 MB goal, 1 MB stacks, 0 MB globals, 2 P
`
	want := GCTrace{Cycles: 2, MaxHeapMB: 37, MaxLiveMB: 19, MaxGoalMB: 37, MaxStacks: 1, LastLiveMB: 19}
	if got := ParseGCTrace(log); got != want {
		t.Errorf("ParseGCTrace = %+v, want %+v", got, want)
	}
}

func TestSpliceMarkdown(t *testing.T) {
	t.Parallel()
	doc := "# B\n\nintro\n\n" + MarkBegin + "\nold table\n" + MarkEnd + "\n\nafter\n"
	for _, tc := range []struct {
		name, doc, want string
		wantErr         bool
	}{
		{"the section between the markers is replaced", doc, "# B\n\nintro\n\n" + MarkBegin + "\n\nnew table\n\n" + MarkEnd + "\n\nafter\n", false},
		{"a document without markers is refused", "# B\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := SpliceMarkdown([]byte(tc.doc), "new table\n")
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Errorf("SpliceMarkdown = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestWritePolicyRewritesWorkspaceAndRuntime(t *testing.T) {
	t.Parallel()
	shipped, err := os.ReadFile(filepath.Join("..", "sandbox.policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path, err := WritePolicy(shipped, t.TempDir(), "runsc", "runsc")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nworkspace_root: ./workspace\n", "runtime: runsc"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the written policy lacks %q", want)
		}
	}
}

func TestPolicyWithImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shipped, err := os.ReadFile("../sandbox.policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := WritePolicy(shipped, dir, "runc", "runc")
	if err != nil {
		t.Fatal(err)
	}
	out, err := policyWithImage(base, "node", "node")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^    image: node\b`).Match(got) || strings.Count(string(got), "image:") != 1 {
		t.Errorf("policy for node:\n%s", got)
	}
	if err := os.WriteFile(base, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := policyWithImage(base, "x", "node"); err == nil || !strings.Contains(err.Error(), "expected one `image:` line") {
		t.Errorf("a policy without an image line: %v, want an error", err)
	}
}

func TestProfileTarget(t *testing.T) {
	t.Parallel()
	warm := func(p50 float64) Summary { return Summary{N: 20, P50: p50, P99: 2 * p50} }
	tests := []struct {
		name     string
		profiles []ProfileRun
		want     string // the target's value
		met      *bool
		row      string // in the table
	}{
		{"python within 1.5x of minimal meets it", []ProfileRun{{Profile: "minimal", Warm: warm(30), Cold: warm(300)}, {Profile: "python", Warm: warm(42), Cold: warm(310)}}, "1.40×, 42.0 ms vs 30.0 ms", ptr(true), "| 5 | warm hello world p50: profile `python` vs `minimal` (the old default image) | 42.0 ms | 30.0 ms | 1.40× | ≤ 1.5× | met |"},
		{"python beyond 1.5x misses it", []ProfileRun{{Profile: "minimal", Warm: warm(30), Cold: warm(300)}, {Profile: "python", Warm: warm(48), Cold: warm(310)}}, "1.60×, 48.0 ms vs 30.0 ms", ptr(false), "| 1.60× | ≤ 1.5× | **missed** |"},
		{"a profile without samples is not measured", []ProfileRun{{Profile: "minimal"}, {Profile: "python", Warm: warm(42), Cold: warm(310)}}, "not measured", nil, "profile `minimal` (0 MiB): warm pool vs cold, p50 | not measured |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Results{Profiles: tt.profiles}
			r.evaluate()
			var got *Target
			for i := range r.Targets {
				if r.Targets[i].ID == "warm_python_vs_minimal" {
					got = &r.Targets[i]
				}
			}
			if got == nil || got.Value != tt.want || (got.Met == nil) != (tt.met == nil) || (got.Met != nil && *got.Met != *tt.met) {
				t.Fatalf("target %+v, want value %q met %v", got, tt.want, tt.met)
			}
			if table := r.Table(); !strings.Contains(table, tt.row) {
				t.Errorf("table lacks %q:\n%s", tt.row, table)
			}
		})
	}
}
