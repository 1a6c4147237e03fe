package bench

import "fmt"

// RunFacts is what a run must establish before its numbers count.
type RunFacts struct {
	Load     LoadResult
	Expected int64 // spans the run sent and must find stored
	// Stored is the stored span count read from the server after the load
	// (-1 when it could not be read).
	Stored int64
	// Restarted is set for runs that restart the server (every wal run);
	// RestartStored is the count read after the restart.
	Restarted     bool
	RestartStored int64
}

// Refusals applies the refusal rules: a run is refused, reported as a
// failure and not as a number, when any batch failed (429, error status,
// request error), a connection was shed, the server acknowledged fewer spans
// than were sent, or the stored count came up short, before or after the
// restart. It returns the reasons; none means the run counts.
func Refusals(f RunFacts) []string {
	var out []string
	l := f.Load
	if n := l.Status429 + l.Errors; n > 0 {
		r := fmt.Sprintf("%d of %d batches failed (%d answered 429, %d errors)", n, l.Requests, l.Status429, l.Errors)
		if l.FirstError != "" {
			r += ": first: " + l.FirstError
		}
		out = append(out, r)
	}
	if l.Shed > 0 {
		out = append(out, fmt.Sprintf("server shed %d connections", l.Shed))
	}
	if l.SentSpans < f.Expected {
		out = append(out, fmt.Sprintf("only %d of %d spans were sent (interrupted or out of time)", l.SentSpans, f.Expected))
	}
	if l.AcceptedSpans < f.Expected {
		out = append(out, fmt.Sprintf("server acknowledged %d of %d spans (%d rejected as partial success)", l.AcceptedSpans, f.Expected, l.RejectedSpans))
	}
	switch {
	case f.Stored < 0:
		out = append(out, "stored span count could not be read")
	case f.Stored < f.Expected:
		out = append(out, fmt.Sprintf("stored count %d is short of %d acknowledged spans", f.Stored, f.Expected))
	}
	if f.Restarted {
		switch {
		case f.RestartStored < 0:
			out = append(out, "stored span count after restart could not be read")
		case f.RestartStored < f.Expected:
			out = append(out, fmt.Sprintf("after restart the stored count %d is short of %d acknowledged spans", f.RestartStored, f.Expected))
		}
	}
	return out
}
