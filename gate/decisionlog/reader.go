package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// line is one verified line of the log, or a gap: lines From to To that
// are gone from disk (their rotated file removed by retention) before
// they were read.
type line struct {
	seq        int64
	hash, prev string
	text       []byte
	gapFrom    int64 // with gapTo, a gap before this line; 0 when none
	gapTo      int64
}

// reader follows the audit log from after a cursor, verifying the chain
// as it goes. Memory: the lines of one Follower.Next (about 4 MiB).
type reader struct {
	path   string
	after  Cursor // lines up to here are done
	fl     *audit.Follower
	chain  audit.Chain
	buf    []audit.Line
	last   int64 // the seq of the last line returned or skipped, 0 before any
	wide   bool  // the follower reads the whole log (the cursor's line was not in the first backlog)
	seeded bool  // the cursor's continuity is checked
}

// newReader starts after c, with head the log's last line now: the
// follower's backlog reaches back to the cursor's line (with room for
// lines written meanwhile).
func newReader(path string, c Cursor, head int64) *reader {
	r := &reader{path: path, after: c, chain: audit.Chain{Partial: true}}
	backlog := math.MaxInt
	if c.Seq > 0 && head >= c.Seq {
		backlog = int(head-c.Seq) + 1 + 4096
	}
	r.fl = audit.NewFollower(path, audit.FollowOptions{Backlog: backlog})
	return r
}

func (r *reader) close() { r.fl.Close() }

// next returns the next line after the cursor, ok false when there is
// none yet. An error is a broken chain or an unreadable log: shipping
// stops.
func (r *reader) next() (l line, ok bool, err error) {
	for {
		if len(r.buf) == 0 {
			lines, err := r.fl.Next()
			if err != nil && len(lines) == 0 {
				return line{}, false, err
			}
			if len(lines) == 0 {
				return line{}, false, nil
			}
			r.buf = lines
		}
		al := r.buf[0]
		r.buf = r.buf[1:]
		l, skip, err := r.take(al)
		if err != nil || !skip {
			return l, err == nil, err
		}
	}
}

// take verifies one line of the follower; skip is set for lines at or
// before the cursor.
func (r *reader) take(al audit.Line) (l line, skip bool, err error) {
	var head struct {
		Seq  int64  `json:"seq"`
		Prev string `json:"prev"`
	}
	if err := json.Unmarshal(al.Text, &head); err != nil || head.Seq < 1 {
		if err == nil {
			err = errors.New("no seq")
		}
		return line{}, false, fmt.Errorf("decision log: %s line %d: %w", al.File.Path, al.Number, err)
	}
	if !r.seeded {
		// The first line read: it must be the cursor's line, the one after
		// it, or (nothing shipped yet) the log's first line.
		if head.Seq > r.after.Seq+1 && r.after.Seq > 0 && !r.wide && head.Seq > 1 {
			// The backlog did not reach back far enough: read the whole log.
			r.fl.Close()
			r.fl, r.buf, r.wide = audit.NewFollower(r.path, audit.FollowOptions{Backlog: math.MaxInt}), nil, true
			return line{}, true, nil
		}
		r.seeded = true
		r.last = r.after.Seq
		if head.Seq <= r.after.Seq {
			r.last = head.Seq - 1
		}
	}
	if head.Seq > r.last+1 {
		// Lines missing on disk: the follower skips a rotated file that
		// retention removed. Counted as a gap; the chain starts again.
		l.gapFrom, l.gapTo = r.last+1, head.Seq-1
		r.chain = audit.Chain{Partial: true}
	}
	if err := r.chain.NextLine(al); err != nil {
		return line{}, false, fmt.Errorf("decision log: the audit log's chain is broken, shipping stopped: %w", err)
	}
	hash := hashLine(al.Text)
	if head.Seq == r.after.Seq && r.after.Seq > 0 && hash != r.after.Hash {
		return line{}, false, fmt.Errorf("decision log: audit line %d is not the line the receiver acknowledged (hash %s, cursor %s): the log was replaced or edited; shipping stopped", head.Seq, hash, r.after.Hash)
	}
	if head.Seq == r.after.Seq+1 && r.after.Seq > 0 && l.gapFrom == 0 && head.Prev != r.after.Hash {
		return line{}, false, fmt.Errorf("decision log: audit line %d does not follow the line the receiver acknowledged last (prev %s, cursor %s); shipping stopped", head.Seq, head.Prev, r.after.Hash)
	}
	r.last = head.Seq
	if head.Seq <= r.after.Seq {
		return line{}, true, nil
	}
	l.seq, l.hash, l.prev, l.text = head.Seq, hash, head.Prev, al.Text
	return l, false, nil
}
