package audit_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// crashChildEnv, set to a log path, makes the test binary a writer that
// the crash test kills: see crashChild. crashWritersEnv sets how many
// goroutines write at once (default 1).
const (
	crashChildEnv   = "GATEKEEPER_AUDIT_CRASH_CHILD"
	crashWritersEnv = "GATEKEEPER_AUDIT_CRASH_WRITERS"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild writes records to the log at path as fast as it can, with a
// rotation every few lines, compression and checkpoints to path.head,
// printing the decision id of each record once Write has returned, until
// it is killed. With more than one writer (crashWritersEnv) the lines are
// committed in groups into files of 8 KiB, so that kills land in the
// middle of batches written with one write call.
func crashChild(path string) {
	head, err := os.OpenFile(path+".head", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// One writer rotates after every line or two; many fill a file with a
	// few batches first.
	writers, _ := strconv.Atoi(os.Getenv(crashWritersEnv))
	maxBytes := int64(700)
	if writers > 1 {
		maxBytes = 8 << 10
	}
	l, err := audit.Open(path, audit.Options{MaxBytes: maxBytes, Compress: true, Head: head, HeadInterval: time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	for g := range max(writers, 1) {
		go func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%d_%d_%d", os.Getpid(), g, i)
				rec := decision(i)
				rec.DecisionID = id
				if err := l.Write(rec); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(out, id)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

// leftoverKinds names what a killed writer left for Open to finish.
func leftoverKinds(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	plain := map[int64]bool{}
	for _, e := range entries {
		name := e.Name()
		switch f := audit.FileAt(name); {
		case name == filepath.Base(path)+".next":
			kinds = append(kinds, "new file not yet renamed")
		case strings.HasSuffix(name, ".gz.tmp"):
			kinds = append(kinds, "compression under way")
		case f.Seq > 0 && !f.Compressed:
			plain[f.Seq] = true
		}
	}
	for _, e := range entries {
		if f := audit.FileAt(e.Name()); f.Seq > 0 && f.Compressed && plain[f.Seq] {
			kinds = append(kinds, "compressed file next to its original")
		}
	}
	if files, err := audit.Files(path); err == nil {
		if n := len(files); n >= 2 && files[n-1].Path == path {
			fa, _ := os.Stat(path)
			fb, _ := os.Stat(files[n-2].Path)
			if fa != nil && fb != nil && os.SameFile(fa, fb) {
				kinds = append(kinds, "active file linked to its closed name")
			}
		}
	}
	return kinds
}

// TestAKilledWriterLeavesASetThatVerifies kills a writer that rotates and
// compresses all the time at random moments, many times over, restarting
// it on the same log. Each restart finishes what the kill left; at the
// end the set verifies, holds every record whose Write returned, and
// agrees with every checkpoint. With eight goroutines writing, lines are
// committed in groups and the kills land in the middle of batches.
func TestAKilledWriterLeavesASetThatVerifies(t *testing.T) {
	t.Parallel()
	for _, writers := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d writers", writers), func(t *testing.T) {
			t.Parallel()
			killWriterRepeatedly(t, writers)
		})
	}
}

func killWriterRepeatedly(t *testing.T, writers int) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	const rounds = 30
	var acked []string
	found := map[string]int{}
	for round := range rounds {
		if round > 0 {
			for _, k := range leftoverKinds(t, path) {
				found[k]++
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashWritersEnv+"="+strconv.Itoa(writers))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		want := 1 + rng.IntN(60)
		for n := 0; n < want && sc.Scan(); n++ {
			acked = append(acked, sc.Text())
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() {
			acked = append(acked, sc.Text())
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: the writer ended by itself (%v): %s", round+1, err, stderr.String())
		}
	}
	t.Logf("left for Open to finish over %d kills: %v", rounds, found)
	for _, k := range leftoverKinds(t, path) {
		found[k]++
	}
	writeRecords(t, path, audit.Options{}, 0, 0) // Open finishes the last kill's leftovers

	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	hf, err := os.Open(path + ".head")
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	heads, err := audit.ReadHeads(hf, path+".head")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.VerifySet(files, audit.VerifyOptions{Heads: heads})
	if err != nil {
		t.Fatalf("VerifySet after %d kills: %v", rounds, err)
	}
	if rep.Heads.Checked+rep.Heads.Unchecked != len(heads) {
		t.Errorf("%d of %d checkpoints checked", rep.Heads.Checked+rep.Heads.Unchecked, len(heads))
	}
	in := map[string]bool{}
	for _, r := range readSetInOrder(t, files) {
		in[r.DecisionID] = true
	}
	for _, id := range acked {
		if !in[id] {
			t.Errorf("record %s was acknowledged but is not in the log", id)
		}
	}
	t.Logf("%d kills, %d files, %d lines, %d acknowledged records all present, %d checkpoints checked", rounds, len(files), rep.Lines, len(acked), rep.Heads.Checked)
}
