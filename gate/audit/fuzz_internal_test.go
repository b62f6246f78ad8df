package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// FuzzVerifySet cuts its input into files at the line ends cuts picks
// and checks VerifySet against Verify on the whole: a set of non-empty
// files verifies from seq 1 exactly when its concatenation does, with the
// same last line; and every problem names one of the files, a line in it
// and a reason.
func FuzzVerifySet(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cuts uint64) {
		var pieces [][]byte
		start, k := 0, 0
		for i, b := range data {
			if b != '\n' {
				continue
			}
			if cuts>>(k%64)&1 == 1 && i+1 < len(data) {
				pieces = append(pieces, data[start:i+1])
				start = i + 1
			}
			k++
		}
		pieces = append(pieces, data[start:])
		srcs := make([]source, len(pieces))
		for i, p := range pieces {
			srcs[i] = source{file: File{Path: fmt.Sprintf("f%d", i)}, open: func() (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(p)), nil
			}}
		}
		rep, err := verifySources(srcs, VerifyOptions{})
		whole, werr := Verify(bytes.NewReader(data))

		if werr == nil && err != nil {
			t.Fatalf("the whole verifies (%d lines), the set of %d files does not: %v", whole.Lines, len(pieces), err)
		}
		if err == nil && rep.StartsAfter == "" {
			if werr != nil {
				t.Fatalf("the set of %d files verifies from seq 1, the whole does not: %v", len(pieces), werr)
			}
			if rep.Lines != whole.Lines || rep.LastSeq != whole.LastSeq || rep.LastHash != whole.LastHash {
				t.Fatalf("set report %d lines to seq %d (%s), whole %d lines to seq %d (%s)",
					rep.Lines, rep.LastSeq, rep.LastHash, whole.Lines, whole.LastSeq, whole.LastHash)
			}
		}
		if err != nil && len(rep.Problems) == 0 {
			t.Fatalf("VerifySet failed without a problem: %v", err)
		}
		lines := map[string]int{}
		total := 0
		for _, fr := range rep.Files {
			lines[fr.File.Path] = fr.Lines
			total += fr.Problems
		}
		if total != len(rep.Problems)+rep.MoreProblems {
			t.Fatalf("files count %d problems, the report lists %d and %d more", total, len(rep.Problems), rep.MoreProblems)
		}
		for _, p := range rep.Problems {
			var be *BreakError
			if !errors.As(p, &be) {
				t.Fatalf("problem %v is not a *BreakError", p)
			}
			n, ok := lines[be.File]
			if !ok || be.Line < 1 || be.Line > max(n, 1) || be.Reason == "" {
				t.Fatalf("problem %+v does not name a line of a file of the set (%d lines)", be, n)
			}
		}
	})
}
