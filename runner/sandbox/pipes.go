package sandbox

import (
	"errors"
	"io"
)

// Pipes carry a sandbox's output from the platform's stream (an attach)
// to the run loop: the platform writes into Writers, the loop reads
// Streams' Stdout and Stderr. A platform makes them when it attaches.
type Pipes struct {
	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
}

// NewPipes returns empty pipes.
func NewPipes() *Pipes {
	p := &Pipes{}
	p.outR, p.outW = io.Pipe()
	p.errR, p.errW = io.Pipe()
	return p
}

// Writers are where the platform writes the sandbox's output.
func (p *Pipes) Writers() (stdout, stderr io.Writer) { return p.outW, p.errW }

// Streams are the sandbox's streams with stdin and the pipes' output.
func (p *Pipes) Streams(stdin io.WriteCloser) Streams {
	return Streams{Stdin: stdin, Stdout: p.outR, Stderr: p.errR}
}

// End says the platform's stream ended, with err (nil: at its end); the
// readers see the rest, then err or io.EOF.
func (p *Pipes) End(err error) {
	if err == nil {
		err = io.EOF
	}
	p.outW.CloseWithError(err)
	p.errW.CloseWithError(err)
}

// errDetached ends the reading of a detached sandbox's output.
var errDetached = errors.New("detached from the sandbox")

// Drop ends the reading: a write of output nobody reads any more fails at
// once rather than hold the platform's stream. A platform's Detach calls
// it.
func (p *Pipes) Drop() {
	p.outR.CloseWithError(errDetached)
	p.errR.CloseWithError(errDetached)
}
