package audit_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/internal/tmpfs"
)

// big is a record whose line needs more than a page, so that it never
// fits in the slack of the file's last page.
func big(i int) audit.Record {
	r := decision(i)
	r.ToolInput = map[string]any{"content": strings.Repeat("x", 8<<10)}
	return r
}

// decisionIDs lists the decision ids of a set, in order.
func decisionIDs(t *testing.T, files []audit.File) []string {
	t.Helper()
	var ids []string
	for _, recs := range readSetInOrder(t, files) {
		if recs.Kind == audit.KindDecision {
			ids = append(ids, recs.DecisionID)
		}
	}
	return ids
}

func readSetInOrder(t *testing.T, files []audit.File) []audit.Record {
	t.Helper()
	lines := readSet(t, files)
	var out []audit.Record
	for _, f := range files {
		for _, r := range lines[f.Path] {
			out = append(out, r.Record)
		}
	}
	return out
}

func TestAFullDiskLeavesNothingHalfWrittenAndWritesResume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts audit.Options
	}{
		{name: "without sync"},
		{name: "with sync", opts: audit.Options{Sync: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tmpfs.Mount(t, 256<<10)
			path := filepath.Join(dir, "audit.jsonl")
			tc.opts.Now = stepClock()
			l, err := audit.Open(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := 1; i <= 3; i++ {
				if err := l.Write(decision(i)); err != nil {
					t.Fatal(err)
				}
			}
			full := tmpfs.Fill(t, dir)
			seq, hash := l.Head()
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := 4; i <= 6; i++ {
				err := l.Write(big(i))
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Write %d on a full disk = %v, want ENOSPC", i, err)
				}
				if errors.Is(err, audit.ErrTorn) {
					t.Errorf("Write %d on a full disk left a torn line: %v", i, err)
				}
				if !strings.Contains(err.Error(), "no space left on device") {
					t.Errorf("Write error %q does not say the disk is full", err)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
					t.Fatalf("after the failed Write %d the file has %d bytes, want the %d it had", i, len(after), len(before))
				}
				if s, h := l.Head(); s != seq || h != hash {
					t.Errorf("Head after a failed Write = %d, want %d", s, seq)
				}
			}
			full.Free(-1)
			for _, rec := range []audit.Record{decision(7), big(8), decision(9)} {
				if err := l.Write(rec); err != nil {
					t.Fatalf("Write %s once space returned: %v", rec.DecisionID, err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := audit.Files(path)
			rep, err := audit.VerifySet(files, audit.VerifyOptions{})
			if err != nil || rep.Lines != 6 || rep.LastSeq != 6 {
				t.Errorf("VerifySet = %d lines to seq %d, %v; want 6 lines to seq 6", rep.Lines, rep.LastSeq, err)
			}
			if got, want := decisionIDs(t, files), []string{"d_1", "d_2", "d_3", "d_7", "d_8", "d_9"}; !slices.Equal(got, want) {
				t.Errorf("the log holds %v, want %v (the failed writes absent)", got, want)
			}
		})
	}
}

func TestRotationFailingForLackOfSpace(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, 256<<10)
	path := filepath.Join(dir, "audit.jsonl")
	l, logs := openRotating(t, path, audit.Options{})
	full := tmpfs.Fill(t, dir)
	before, _ := os.ReadFile(path)
	err := l.Write(big(2))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write needing a rotation on a full disk = %v, want ENOSPC", err)
	}
	if got := logs.messages(); !slices.Equal(got, []string{"WARN audit log rotation failed; writing on in the old file and retrying at each line"}) {
		t.Errorf("logged %q, want the rotation's failure", got)
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("the failed rotation left %v behind", left)
	}
	if files, _ := audit.Files(path); len(files) != 1 {
		t.Errorf("after the failed rotation the log has files %v, want the active one only", names(files))
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("the failed rotation changed the active file")
	}
	full.Free(-1)
	if err := l.Write(decision(3)); err != nil {
		t.Fatalf("Write once space returned: %v", err)
	}
	if got := logs.messages(); len(got) != 2 || got[1] != "INFO audit log rotation works again" {
		t.Errorf("logged %q, want the rotation to work again", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := audit.Files(path)
	if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if got, want := decisionIDs(t, files), []string{"d_1", "d_3"}; !slices.Equal(got, want) {
		t.Errorf("the log holds %v, want %v", got, want)
	}
	if rep, err := audit.VerifySet(files, audit.VerifyOptions{}); err != nil || rep.Lines != 3 {
		t.Errorf("VerifySet = %d lines, %v; want 3 lines (two records and a rotate line)", rep.Lines, err)
	}
}

func TestCompressionFailingForLackOfSpaceIsRetried(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, 256<<10)
	path := filepath.Join(dir, "audit.jsonl")
	l, logs := openRotating(t, path, audit.Options{Compress: true})
	full := tmpfs.Fill(t, dir)
	// One page: the rotation's new file takes it, the record fits in its
	// slack, and the compression finds no room.
	full.Free(1)
	if err := l.Write(decision(2)); err != nil {
		t.Fatalf("Write with one page free: %v", err)
	}
	files, _ := audit.Files(path)
	if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	const failed = "WARN audit log: compressing a closed file failed; it stays uncompressed until the next rotation tries again"
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(logs.messages(), failed); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no compression failure logged within 10s: %q", logs.messages())
		}
	}
	full.Free(-1)
	if err := l.Write(decision(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files = checkRotatedSet(t, path, 3, "the file would pass 10 bytes")
	if got, want := names(files), []string{"audit.jsonl.000000000001.gz", "audit.jsonl.000000000002.gz", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("files after space returned = %v, want %v", got, want)
	}
	if got := logs.messages(); !slices.Equal(got, []string{failed}) {
		t.Errorf("logged %q, want one compression failure", got)
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("the failed compression left %v behind", left)
	}
}
