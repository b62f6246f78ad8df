package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestGroupCommitWritesEveryLineBeforeItsWriteReturns runs many writers at
// once against a log slowed down under its lock (its clock sleeps), so that
// lines queue up and are written in batches. Every Write that returned nil
// must have its line in the file by then; a Write that started after
// another returned must come later in the chain; the chain verifies, with
// rotations in the middle of batches too; and, where the write calls are
// counted, some write call carried more than one line, or the test proved
// nothing.
func TestGroupCommitWritesEveryLineBeforeItsWriteReturns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		// checkFile reads the file after each Write to find its line, and
		// the write calls are counted (the set does not rotate then).
		checkFile bool
	}{
		{name: "without sync", checkFile: true},
		{name: "with sync", opts: Options{Sync: true}, checkFile: true},
		{name: "rotating every few lines", opts: Options{MaxBytes: 2048}},
		{name: "rotating every few lines with sync", opts: Options{MaxBytes: 2048, Sync: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			tc.opts.Now = func() time.Time {
				time.Sleep(100 * time.Microsecond) // under the lock: the others queue up
				return time.Now()
			}
			l, err := Open(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			// Each write call is counted with the lines it carries.
			var mu sync.Mutex
			calls, maxLines := 0, 0
			if tc.checkFile {
				l.mu.Lock()
				f := l.f
				l.w = writerFunc(func(p []byte) (int, error) {
					mu.Lock()
					calls++
					maxLines = max(maxLines, bytes.Count(p, []byte{'\n'}))
					mu.Unlock()
					return f.Write(p)
				})
				l.mu.Unlock()
			}

			const writers, each = 12, 30
			var (
				order    sync.Mutex
				returned []string           // ids, in the order their Writes returned
				before   = map[string]int{} // id -> how many Writes had returned when it started
				wg       sync.WaitGroup
				errs     = make(chan error, writers*each)
			)
			for g := range writers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("d_%d_%d", g, i)
						order.Lock()
						before[id] = len(returned)
						order.Unlock()
						rec := Record{Kind: KindDecision, DecisionID: id, Tool: "Read", Decision: "allow", Rule: "r", Reason: "why"}
						if err := l.Write(rec); err != nil {
							errs <- fmt.Errorf("Write %s: %w", id, err)
							return
						}
						if tc.checkFile {
							b, err := os.ReadFile(path)
							if err != nil {
								errs <- err
								return
							}
							if !bytes.Contains(b, []byte(`"decision_id":"`+id+`"`)) {
								errs <- fmt.Errorf("Write %s returned before its line was in the file", id)
							}
						}
						order.Lock()
						returned = append(returned, id)
						order.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			files, err := Files(path)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := VerifySet(files, VerifyOptions{})
			if err != nil {
				t.Fatalf("VerifySet: %v", err)
			}
			seq := map[string]int64{}
			for _, f := range files {
				r, err := openFile(f)
				if err != nil {
					t.Fatal(err)
				}
				err = eachLine(r, func(content []byte, _ bool) error {
					var rec struct {
						Seq        int64  `json:"seq"`
						DecisionID string `json:"decision_id"`
					}
					if err := json.Unmarshal(content, &rec); err != nil {
						return err
					}
					if rec.DecisionID != "" {
						if _, dup := seq[rec.DecisionID]; dup {
							t.Errorf("%s is in the log twice", rec.DecisionID)
						}
						seq[rec.DecisionID] = rec.Seq
					}
					return nil
				})
				r.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(seq) != writers*each {
				t.Fatalf("%d records in the log (%d lines), want %d", len(seq), rep.Lines, writers*each)
			}
			// A Write that started after others returned comes after them.
			var maxDone int64
			done := make([]int64, len(returned)+1) // done[k]: highest seq of the first k returned
			for k, id := range returned {
				maxDone = max(maxDone, seq[id])
				done[k+1] = maxDone
			}
			for id, k := range before {
				if seq[id] <= done[k] {
					t.Errorf("%s (seq %d) started after Writes up to seq %d had returned, but comes before them", id, seq[id], done[k])
				}
			}
			if rotated := len(files) > 1; rotated != (tc.opts.MaxBytes > 0) {
				t.Errorf("%d files: the log should rotate only when MaxBytes is set", len(files))
			}
			if !tc.checkFile {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if maxLines < 2 {
				t.Fatalf("no write call carried more than one line (%d calls for %d lines): nothing was committed as a group", calls, writers*each)
			}
			t.Logf("%d lines in %d write calls, at most %d lines in one", writers*each, calls, maxLines)
		})
	}
}
