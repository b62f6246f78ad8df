package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// headKind marks a checkpoint line, so that checkpoints can be picked out
// of a stream that carries other lines too (syslog, a container's stdout).
const headKind = "audit_head"

// Head is a checkpoint of the chain head: the newest line of the log when
// it was taken. The chain proves every line against the one before, so
// only a head kept somewhere else shows that lines were cut off the end,
// or that the end was rewritten: VerifySet checks a set against heads.
type Head struct {
	// Log is the path of the log's active file.
	Log string `json:"log"`
	// File is the name of the file the line was in when the head was taken.
	File string `json:"file"`
	// Seq and Hash are the line's seq and the hex SHA-256 of its bytes
	// without the newline (0 and 64 zeros for an empty log).
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// Time is when the head was taken.
	Time time.Time `json:"time"`
}

// headLine is the JSON form of a checkpoint, one line.
type headLine struct {
	Kind string `json:"kind"`
	Head
}

// AppendHead appends h as a checkpoint line, with its newline, to b:
// {"kind":"audit_head","log":…,"file":…,"seq":…,"hash":…,"time":…}.
func AppendHead(b []byte, h Head) []byte {
	line, _ := json.Marshal(headLine{Kind: headKind, Head: h}) // cannot fail: strings, numbers, a time
	return append(append(b, line...), '\n')
}

// HeadAt is a checkpoint and where it was read.
type HeadAt struct {
	Head
	// Source names where it was read (a file, or "-" for stdin).
	Source string
	// Line is its line number there.
	Line int
}

// ReadHeads reads the checkpoints in r, in order: every line that contains
// {"kind":"audit_head" from there on, so that a prefix a log collector
// adds (syslog's date and tag) does not matter; other lines are skipped. A
// line that has the marker but not a whole checkpoint after it is an
// error naming source and the line.
func ReadHeads(r io.Reader, source string) ([]HeadAt, error) {
	marker := []byte(`{"kind":"` + headKind + `"`)
	var heads []HeadAt
	n := 0
	err := eachLine(r, func(content []byte, _ bool) error {
		n++
		i := bytes.Index(content, marker)
		if i < 0 {
			return nil
		}
		var h headLine
		if err := json.NewDecoder(bytes.NewReader(content[i:])).Decode(&h); err != nil {
			return fmt.Errorf("%s line %d: not a checkpoint: %w", source, n, err)
		}
		if h.Seq < 0 || len(h.Hash) != len(zeroHash) || !isLowerHex(h.Hash) {
			return fmt.Errorf("%s line %d: not a checkpoint: seq or hash out of form", source, n)
		}
		heads = append(heads, HeadAt{Head: h.Head, Source: source, Line: n})
		return nil
	})
	if err != nil {
		return heads, fmt.Errorf("read checkpoints: %w", err)
	}
	return heads, nil
}

// headState is what a Log knows of the checkpoints it wrote.
type headState struct {
	mu      sync.Mutex // serializes writes to Options.Head
	written bool
	seq     int64 // seq of the last checkpoint written
	failing bool  // the last write failed
}

func (l *Log) headLoop() {
	var tick <-chan time.Time
	if l.opts.HeadInterval > 0 {
		t := time.NewTicker(l.opts.HeadInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.stop:
			return
		case <-tick:
		case <-l.headWake:
		}
		l.writeHead(false)
	}
}

// writeHead writes a checkpoint of the current head to Options.Head, if
// the head moved since the last one or force is set.
func (l *Log) writeHead(force bool) {
	if l.opts.Head == nil {
		return
	}
	l.mu.Lock()
	h := Head{Log: l.path, File: l.base, Seq: l.seq, Hash: string(l.prev[:]), Time: l.opts.Now().UTC()}
	l.mu.Unlock()

	s := &l.head
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && s.written && h.Seq == s.seq {
		return
	}
	_, err := l.opts.Head.Write(AppendHead(nil, h))
	switch {
	case err != nil && !s.failing:
		l.log.Warn("audit log: writing a head checkpoint failed", "audit_log", l.path, "err", err)
	case err == nil && s.failing:
		l.log.Info("audit log: head checkpoints are written again", "audit_log", l.path)
	}
	s.failing = err != nil
	if err == nil {
		s.written, s.seq = true, h.Seq
	}
}
