package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// zeroHash is the prev of the first line.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Report is what Verify found.
type Report struct {
	// Lines is the number of lines that verified, from the first one on.
	Lines int
	// LastSeq is the seq of the last line that verified, 0 if none did.
	LastSeq int64
	// LastHash is the hex SHA-256 of the last line that verified (without
	// its newline), or 64 zeros if none did.
	//
	// The chain proves each line against the one before it, so it cannot
	// show that the last lines were edited or cut off: compare LastSeq and
	// LastHash with a head saved elsewhere (Log.Head) to detect that.
	LastHash string
}

// chainFields are the parts of a line Verify checks; the rest of the
// record is covered by the next line's hash. Kind, PrevFile and Pruned
// matter on rotate lines.
type chainFields struct {
	Seq      *int64   `json:"seq"`
	Time     string   `json:"time"`
	Prev     string   `json:"prev"`
	Kind     string   `json:"kind"`
	PrevFile string   `json:"prev_file"`
	Pruned   []string `json:"pruned"`
}

// parseLine decodes the chain fields of content, a line without its
// newline; complete is false for a last line that has no newline. reason
// is non-empty when the line is not a whole record.
func parseLine(content []byte, complete bool) (f chainFields, reason string) {
	if len(content) == 0 || content[0] != '{' || content[len(content)-1] != '}' ||
		json.Unmarshal(content, &f) != nil {
		return chainFields{}, "line is not a JSON record"
	}
	if !complete {
		return chainFields{}, "line is not newline-terminated"
	}
	return f, ""
}

// seq returns the seq of f, 0 if it has none.
func (f chainFields) seq() int64 {
	if f.Seq == nil {
		return 0
	}
	return *f.Seq
}

// checkLine checks that content, line lineNo of a file, is a record with
// seq want whose prev is prev; first says it is the first line of the
// log. It returns the seq found (0 if none) and, when the line is bad, a
// reason.
func checkLine(content []byte, complete bool, want int64, prev string, lineNo int, first bool) (int64, string) {
	f, reason := parseLine(content, complete)
	if reason != "" {
		return 0, reason
	}
	seq := f.seq()
	switch {
	case f.Seq == nil:
		return 0, fmt.Sprintf("seq %d missing: line has no seq", want)
	case seq > want:
		return seq, fmt.Sprintf("seq %d missing: found %d", want, seq)
	case seq < want:
		return seq, fmt.Sprintf("seq %d expected: found %d", want, seq)
	}
	if f.Prev != prev {
		switch {
		case first:
			return seq, "prev hash of the first line is not 64 zeros"
		case lineNo == 1:
			return seq, "prev hash does not match the last line of the file before"
		}
		return seq, fmt.Sprintf("prev hash does not match line %d", lineNo-1)
	}
	if _, err := time.Parse(time.RFC3339Nano, f.Time); err != nil {
		return seq, "time is not RFC 3339"
	}
	return seq, ""
}

// checkTail checks that content, the last line of a file Open continues,
// is a record the chain can continue from: it parses, has a positive seq,
// a prev that is a hex SHA-256 and an RFC 3339 time. It returns the seq
// found and, when the line is bad, a reason.
func checkTail(content []byte, complete bool) (int64, string) {
	f, reason := parseLine(content, complete)
	if reason != "" {
		return 0, reason
	}
	seq := f.seq()
	if seq < 1 {
		return seq, "line has no positive seq"
	}
	if len(f.Prev) != len(zeroHash) || !isLowerHex(f.Prev) {
		return seq, "prev is not a hex SHA-256"
	}
	if _, err := time.Parse(time.RFC3339Nano, f.Time); err != nil {
		return seq, "time is not RFC 3339"
	}
	return seq, ""
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// hashLine returns the hex SHA-256 of content.
func hashLine(content []byte) string {
	return digest.SHA256(content)
}

// Verify reads an audit log from r and checks its chain: every line is a
// JSON record ending in a newline, seq counts 1, 2, 3… and prev is the
// SHA-256 of the line before (64 zeros on line 1). An edited line therefore
// fails at the next line (or at itself when the edit breaks its own JSON,
// seq or prev), a deleted or reordered line fails at its position, and a
// truncated last line fails at itself. An empty input verifies with zero
// lines.
//
// It returns the Report of the lines that verified and, at the first bad
// line, a *BreakError (wrapping ErrBroken); a read error is returned
// wrapped as it is. An edit of the last line that keeps it valid, or the
// removal of whole lines at the end, can only be seen by comparing the
// Report with a head saved elsewhere (see Report.LastHash).
func Verify(r io.Reader) (Report, error) {
	var c Chain
	err := eachLine(r, func(content []byte, complete bool) error { return c.Next(content, complete) })
	rep, cerr := c.Report()
	switch {
	case cerr != nil:
		return rep, cerr
	case err != nil:
		return rep, fmt.Errorf("read audit log: %w", err)
	}
	return rep, nil
}

// VerifyFile is Verify on the file at path; its errors name the file.
func VerifyFile(path string) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit log: %w", err)
	}
	defer f.Close()
	rep, err := Verify(f)
	if err != nil {
		return rep, fmt.Errorf("verify audit log %s: %w", path, err)
	}
	return rep, nil
}
