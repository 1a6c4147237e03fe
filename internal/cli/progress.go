package cli

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress lines: long commands (demo, load, fsck, compact, erase --wait)
// show what they are doing on one line of stderr, redrawn in place, when
// stderr is a terminal; otherwise they print nothing, so that logs and
// pipes get only the result.

// progressLine redraws one line on a terminal: each line written to it
// replaces the last. Close clears it.
type progressLine struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// newProgress returns a progress line on env.Stderr, or nil when stderr is
// not a terminal.
func newProgress(env *Env) *progressLine {
	if !isTerminal(env.Stderr) {
		return nil
	}
	return &progressLine{w: env.Stderr}
}

// Write takes lines ending in '\n' (as bench.Load writes its progress) and
// shows the last complete one.
func (p *progressLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s", bytes.TrimSpace(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
}

// Close clears the line.
func (p *progressLine) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, "\r\x1b[K")
}

// while shows "what... 3s" on the progress line until the returned stop is
// called; a nil progress line shows nothing.
func (p *progressLine) while(what string) (stop func()) {
	if p == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() { // owned by while; stop ends it and waits
		defer close(finished)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			fmt.Fprintf(p, "%s... %s\n", what, time.Since(start).Round(time.Second))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.Close()
	}
}
