package audit

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// maxProblems bounds the problems a SetReport lists; more are counted.
const maxProblems = 100

// VerifyOptions says what VerifySet checks beyond the chain.
type VerifyOptions struct {
	// Heads are checkpoints (see ReadHeads) the set must agree with.
	Heads []HeadAt
	// Partial accepts a set that starts with a rotate line after seq 1 even
	// when no rotate line in the set records its predecessor as pruned: a
	// part of a log chosen on purpose.
	Partial bool
}

// Position is a line of a file of a set.
type Position struct {
	Path string
	Line int
	Seq  int64
}

// SetReport is what VerifySet found.
type SetReport struct {
	// Files has one entry per file, in the order checked.
	Files []FileReport
	// Lines counts the lines read in all files.
	Lines int
	// FirstSeq is the seq of the set's first record; LastSeq and LastHash
	// are the seq and hex SHA-256 of the last line the chain reached (0
	// and 64 zeros for a set without lines).
	FirstSeq, LastSeq int64
	LastHash          string
	// StartsAfter names the file before the set's first line when that is
	// a rotate line (the set does not start at seq 1). PrunedAt is the
	// rotate line that records that file as removed by retention, nil if
	// none does.
	StartsAfter string
	PrunedAt    *Position
	// Heads is what the checkpoints showed.
	Heads HeadReport
	// Problems lists what is wrong, the missing start of the set first,
	// then in the order found: a *BreakError (with File) for the chain, a
	// *HeadError for a checkpoint. At most maxProblems are listed;
	// MoreProblems counts the rest.
	Problems     []error
	MoreProblems int
}

// FileReport is what VerifySet found in one file.
type FileReport struct {
	File File
	// Lines counts the file's lines.
	Lines int
	// FirstSeq and LastSeq are the seqs of the first and last lines that
	// parsed, 0 when none did.
	FirstSeq, LastSeq int64
	// Problems counts the problems found in the file.
	Problems int
}

// HeadReport is what VerifySet made of the checkpoints.
type HeadReport struct {
	// Checked counts the checkpoints whose line was found and matched.
	Checked int
	// Unchecked counts the checkpoints older than the set's first line
	// (their files pruned) or of an empty log, which prove nothing here.
	Unchecked int
	// Newest is the newest checkpoint that matched, and NewestAt its line.
	Newest   *HeadAt
	NewestAt Position
}

// VerifySet checks a rotated log, given as its files oldest first (see
// Files, DirSets and FileAt), as one chain: within each file as Verify
// does, and across files, where the first line of each file must carry the
// next seq and the hash of the last line of the file before (the rotate
// line does). Where a file's name gives a seq, its first line must have it.
// The set must start at seq 1, or with a rotate line whose predecessor a
// rotate line of the set records as pruned (or opts.Partial).
//
// Unlike Verify it goes on after a problem, taking the chain up again from
// the line that broke it, so that each missing, reordered, duplicated or
// edited file is reported with its own file and line. It also checks
// opts.Heads: the line of each checkpoint's seq must have its hash, and
// the log must reach the newest checkpoint.
//
// It returns the report and, when there are problems, an error joining
// them (wrapping ErrBroken or ErrCutOff); an error reading a file (other
// than corrupt compressed data, a problem) is returned as it is, with the
// report so far.
func VerifySet(files []File, opts VerifyOptions) (SetReport, error) {
	srcs := make([]source, len(files))
	for i, f := range files {
		srcs[i] = source{file: f, open: func() (io.ReadCloser, error) { return openFile(f) }}
	}
	return verifySources(srcs, opts)
}

// source is a file of a set and how to read it.
type source struct {
	file File
	open func() (io.ReadCloser, error)
}

func verifySources(srcs []source, opts VerifyOptions) (SetReport, error) {
	v := &setVerifier{
		rep:    SetReport{LastHash: zeroHash},
		opts:   opts,
		names:  map[string]int{},
		starts: map[int64]int{},
		heads:  map[int64][]HeadAt{},
		pruned: map[string]Position{},
		hash:   zeroHash,
	}
	for i, s := range srcs {
		if _, ok := v.names[s.file.Name()]; !ok {
			v.names[s.file.Name()] = i
		}
	}
	for _, h := range opts.Heads {
		v.heads[h.Seq] = append(v.heads[h.Seq], h)
	}
	for i := range srcs {
		if err := v.file(srcs, i); err != nil {
			return v.rep, err
		}
	}
	v.finish(srcs)
	if len(v.rep.Problems) > 0 {
		return v.rep, errors.Join(v.rep.Problems...)
	}
	return v.rep, nil
}

// setVerifier carries the chain from line to line and file to file.
type setVerifier struct {
	rep    SetReport
	opts   VerifyOptions
	names  map[string]int      // file name to its first index in the set
	starts map[int64]int       // seq of a file's first line to the file's index
	heads  map[int64][]HeadAt  // checkpoints not yet checked, by seq
	pruned map[string]Position // files rotate lines pruned, to the first such line

	started bool     // a line of the set has parsed
	seq     int64    // seq of the line the chain reached
	hash    string   // its hash
	at      Position // where it is
	// unknownPrev is set after a line that did not parse: the next line's
	// prev cannot be checked and its seq is taken as it comes.
	unknownPrev bool
	// behind is set while the lines of a file that started behind the
	// chain (a duplicated or misplaced file) stay behind it: the file is
	// reported once, not line by line.
	behind bool
}

func (v *setVerifier) file(srcs []source, i int) error {
	s := srcs[i]
	fr := &FileReport{File: s.file}
	v.behind = false
	r, err := s.open()
	var ce *corruptError
	switch {
	case errors.As(err, &ce):
		v.problem(fr, 1, 0, ce.Error())
	case err != nil:
		return fmt.Errorf("verify audit log: %w", err)
	default:
		err = eachLine(r, func(content []byte, complete bool) error {
			fr.Lines++
			v.line(srcs, i, fr, content, complete)
			return nil
		})
		r.Close()
		switch {
		case errors.As(err, &ce):
			v.problem(fr, fr.Lines+1, 0, ce.Error())
		case err != nil:
			return fmt.Errorf("verify audit log %s: %w", s.file.Path, err)
		case fr.Lines == 0 && len(srcs) > 1:
			v.problem(fr, 1, 0, "the file is empty")
		}
	}
	v.rep.Lines += fr.Lines
	v.rep.Files = append(v.rep.Files, *fr)
	return nil
}

// line checks line n (content) of file i against the chain so far.
func (v *setVerifier) line(srcs []source, i int, fr *FileReport, content []byte, complete bool) {
	n := fr.Lines
	f, reason := parseLine(content, complete)
	if reason == "" && f.Seq == nil {
		reason = "line has no seq"
	}
	if reason != "" {
		v.problem(fr, n, 0, reason)
		v.unknownPrev = true
		return
	}
	seq := *f.Seq
	if fr.FirstSeq == 0 {
		fr.FirstSeq = seq
	}
	fr.LastSeq = seq
	here := Position{Path: fr.File.Path, Line: n, Seq: seq}
	if f.Kind == string(KindRotate) {
		for _, name := range f.Pruned {
			if _, ok := v.pruned[name]; !ok {
				v.pruned[name] = here
			}
		}
	}
	first := n == 1
	if first {
		if fr.File.Seq > 0 && seq != fr.File.Seq {
			v.problem(fr, n, seq, fmt.Sprintf("its name says it starts at seq %d, but its first line has seq %d", fr.File.Seq, seq))
		}
		if _, ok := v.starts[seq]; !ok {
			v.starts[seq] = i
		}
	}

	want := v.seq + 1
	switch {
	case !v.started:
		v.started = true
		v.rep.FirstSeq = seq
		switch {
		case v.unknownPrev:
		case seq == 1 && f.Prev != zeroHash:
			v.problem(fr, n, seq, "prev hash of the first line is not 64 zeros")
		case seq == 1:
		case f.Kind == string(KindRotate):
			v.rep.StartsAfter = f.PrevFile
		default:
			v.problem(fr, n, seq, fmt.Sprintf("%s missing: the log's first line is neither seq 1 nor a rotate line", seqs(1, seq-1)))
		}
	case v.unknownPrev && seq <= v.seq, !v.unknownPrev && seq < want:
		switch {
		case first:
			v.behind = true
			if j := v.starts[seq]; j != i {
				v.problem(fr, n, seq, fmt.Sprintf("it starts at seq %d like %s: a duplicated file", seq, srcs[j].file.Path))
			} else {
				v.problem(fr, n, seq, fmt.Sprintf("it starts at seq %d, but the chain already reached seq %d in %s: a duplicated or reordered file", seq, v.seq, v.at.Path))
			}
		case !v.behind:
			v.problem(fr, n, seq, fmt.Sprintf("seq %d expected: found %d", want, seq))
		}
		return // the line is not taken into the chain
	case v.unknownPrev:
	case seq > want:
		switch {
		case !first:
			v.problem(fr, n, seq, fmt.Sprintf("%s missing: found %d", seqs(want, seq-1), seq))
		case f.Kind == string(KindRotate) && f.PrevFile != srcs[i-1].file.Name():
			switch j, ok := v.names[f.PrevFile]; {
			case ok && j == i:
				v.problem(fr, n, seq, fmt.Sprintf("%s missing: it follows %s, the name it has itself: a renamed file", seqs(want, seq-1), f.PrevFile))
			case ok && j > i:
				v.problem(fr, n, seq, fmt.Sprintf("%s missing: it follows %s, which comes later in the list: the files are out of order", seqs(want, seq-1), f.PrevFile))
			default:
				v.problem(fr, n, seq, fmt.Sprintf("%s missing: it follows %s, which is not in the set", seqs(want, seq-1), f.PrevFile))
			}
		default:
			v.problem(fr, n, seq, fmt.Sprintf("%s missing between %s line %d and this file", seqs(want, seq-1), v.at.Path, v.at.Line))
		}
	case f.Prev != v.hash:
		if first {
			v.problem(fr, n, seq, fmt.Sprintf("prev hash does not match the last line of %s (line %d)", v.at.Path, v.at.Line))
		} else {
			v.problem(fr, n, seq, fmt.Sprintf("prev hash does not match line %d", n-1))
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, f.Time); err != nil {
		v.problem(fr, n, seq, "time is not RFC 3339")
	}
	v.unknownPrev, v.behind = false, false
	v.seq, v.hash, v.at = seq, hashLine(content), here
	v.rep.LastSeq, v.rep.LastHash = v.seq, v.hash
	v.checkHeads(here)
}

// checkHeads checks the checkpoints of the line the chain just reached.
func (v *setVerifier) checkHeads(at Position) {
	for _, h := range v.heads[at.Seq] {
		if h.Hash != v.hash {
			v.headProblem(h, fmt.Sprintf("%s line %d has seq %d but not the hash this checkpoint of %s recorded: the log was rewritten from there on",
				at.Path, at.Line, at.Seq, h.Time.Format(time.RFC3339Nano)))
			continue
		}
		v.rep.Heads.Checked++
		if n := v.rep.Heads.Newest; n == nil || h.Seq > n.Seq || h.Seq == n.Seq && h.Time.After(n.Time) {
			v.rep.Heads.Newest, v.rep.Heads.NewestAt = &h, at
		}
	}
	delete(v.heads, at.Seq)
}

// finish reports what can only be told at the end: checkpoints the log
// does not reach and a start that is not accounted for.
func (v *setVerifier) finish(srcs []source) {
	var cut *HeadAt
	for _, seq := range slices.Sorted(maps.Keys(v.heads)) {
		for _, h := range v.heads[seq] {
			switch {
			case seq == 0 || v.started && seq < v.rep.FirstSeq:
				v.rep.Heads.Unchecked++
			case seq > v.seq:
				if cut == nil || h.Seq > cut.Seq || h.Seq == cut.Seq && h.Time.After(cut.Time) {
					cut = &h
				}
			default:
				v.headProblem(h, fmt.Sprintf("the log has no line with seq %d to check this checkpoint of %s against", seq, h.Time.Format(time.RFC3339Nano)))
			}
		}
	}
	if cut != nil {
		end := "an empty log"
		if v.started {
			end = fmt.Sprintf("seq %d (%s line %d)", v.seq, v.at.Path, v.at.Line)
		}
		v.headProblem(*cut, fmt.Sprintf("the log ends at %s, but this checkpoint of %s has seq %d: %s missing, cut off the end",
			end, cut.Time.Format(time.RFC3339Nano), cut.Seq, seqs(v.seq+1, cut.Seq)))
	}
	if v.rep.StartsAfter == "" {
		return
	}
	if at, ok := v.pruned[v.rep.StartsAfter]; ok {
		v.rep.PrunedAt = &at
		return
	}
	if v.opts.Partial {
		return
	}
	first := srcs[0].file.Path
	for _, f := range v.rep.Files {
		if f.Lines > 0 {
			first = f.File.Path
			break
		}
	}
	be := &BreakError{File: first, Line: 1, Seq: v.rep.FirstSeq, Reason: fmt.Sprintf(
		"%s missing: the set starts after %s, which is not in it, and no rotate line records it as pruned",
		seqs(1, v.rep.FirstSeq-1), v.rep.StartsAfter)}
	v.rep.Problems = append([]error{be}, v.rep.Problems...)
	if len(v.rep.Problems) > maxProblems {
		v.rep.Problems = v.rep.Problems[:maxProblems]
		v.rep.MoreProblems++
	}
	for i := range v.rep.Files {
		if v.rep.Files[i].File.Path == first {
			v.rep.Files[i].Problems++
			break
		}
	}
}

func (v *setVerifier) problem(fr *FileReport, line int, seq int64, reason string) {
	fr.Problems++
	v.add(&BreakError{File: fr.File.Path, Line: line, Seq: seq, Reason: reason})
}

func (v *setVerifier) headProblem(h HeadAt, reason string) {
	v.add(&HeadError{Head: h, Reason: reason})
}

func (v *setVerifier) add(err error) {
	if len(v.rep.Problems) < maxProblems {
		v.rep.Problems = append(v.rep.Problems, err)
	} else {
		v.rep.MoreProblems++
	}
}

// seqs renders the seqs a to b: "seq 7" or "seq 7-9".
func seqs(a, b int64) string {
	if a == b {
		return fmt.Sprintf("seq %d", a)
	}
	return fmt.Sprintf("seq %d-%d", a, b)
}
