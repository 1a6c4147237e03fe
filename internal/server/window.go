package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rastro-dev/rastro/internal/query"
)

// The window rule (docs/api.md#time-windows). Every listing route (a route
// whose table entry names a listing) answers for one time window:
//
//   - since defaults to query.DefaultWindow before until, or before now;
//     since=all reaches back to the first span;
//   - the answer carries the window it searched ("window": since, until,
//     whether since was the default, a description such as "the last 24h",
//     and a wider since to try);
//   - an empty answer also carries a "hint" naming the window and how to
//     widen it: "no spans in the last 24h; try since=7d".
//
// The rule is applied here, around the handlers, so that no listing can
// have a default of its own: mux wraps every route that declares a listing.

// listing describes a listing route's answer for the window rule.
type listing struct {
	field string // the JSON field holding the items, e.g. "spans"
	noun  string // what the items are, for the hint: "spans", "sessions"
}

// windowJSONField is the "window" object of a listing's answer.
type windowJSONField struct {
	Since       string `json:"since"`           // RFC 3339; 1970-01-01T00:00:00Z for since=all
	Until       string `json:"until,omitempty"` // absent: up to now
	Default     bool   `json:"default"`         // since was not given
	Description string `json:"description"`     // "the last 24h", "all time", "from ... to ..."
	// Wider is a since that searches more ("7d", "30d", "all"); absent
	// when the window is already all time.
	Wider string `json:"wider,omitempty"`
}

// sinceAll is since=all: the window reaches back to the first span.
const sinceAll = "all"

// resolveWindow reads since and until for the window rule and rewrites
// them in v as absolute times, so that the handler and the answer's
// window field describe the same instants.
func resolveWindow(v url.Values, now time.Time) (windowJSONField, error) {
	var win windowJSONField
	var until time.Time
	var untilErr error // reported after since's own errors
	if u := v.Get("until"); u != "" {
		t, err := query.ParseTime(u, now)
		if err != nil {
			return win, fmt.Errorf("until: %w", err)
		}
		if !inRange(t) {
			untilErr = fmt.Errorf("until: time %q is outside 1970..2261", u)
		}
		until = t
		win.Until = t.UTC().Format(time.RFC3339Nano)
		v.Set("until", win.Until)
	}
	end := now
	if !until.IsZero() {
		end = until
	}
	var since time.Time
	relative := false
	switch s := strings.TrimSpace(v.Get("since")); {
	case s == "":
		win.Default = true
		since = end.Add(-query.DefaultWindow)
		if untilErr != nil {
			return win, untilErr
		}
		if !inRange(since) {
			return win, fmt.Errorf("since: outside 1970..2261 (since was not given; it defaults to %s before until)", fmtWindow(query.DefaultWindow))
		}
	case strings.EqualFold(s, sinceAll):
		since = time.Unix(0, 0)
	default:
		t, err := query.ParseTime(s, now)
		if err != nil {
			return win, fmt.Errorf("since: %w", err)
		}
		if !inRange(t) {
			return win, fmt.Errorf("since: time %q is outside 1970..2261", s)
		}
		since = t
		// 1h, now-7d: a duration before now, not a point in time.
		relative = !strings.ContainsRune(s, 'T') && strings.Trim(s, "0123456789") != ""
	}
	if untilErr != nil {
		return win, untilErr
	}
	win.Since = since.UTC().Format(time.RFC3339Nano)
	v.Set("since", win.Since)
	if !since.Before(end) {
		return win, nil // the handler's parameter check words the error
	}
	d := end.Sub(since)
	switch {
	case since.UnixNano() <= 0:
		win.Description = "all time"
		if !until.IsZero() {
			win.Description = "all time up to " + win.Until
		}
	case until.IsZero() && (win.Default || relative):
		win.Description = "the last " + fmtWindow(d)
	case until.IsZero():
		win.Description = "since " + win.Since
	case win.Default:
		win.Description = "the " + fmtWindow(d) + " before " + win.Until
	default:
		win.Description = "from " + win.Since + " to " + win.Until
	}
	if since.UnixNano() > 0 {
		win.Wider = sinceAll
		for _, w := range []time.Duration{7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour} {
			if w > d && until.IsZero() {
				win.Wider = fmtWindow(w)
				break
			}
		}
	}
	return win, nil
}

// inRange: the times a window may name, as query.FromValues checks them.
func inRange(t time.Time) bool { return t.UnixNano() >= 0 && t.Year() >= 1970 && t.Year() <= 2261 }

// fmtWindow writes a window length the way since takes it: 24h, 7d, 90m.
func fmtWindow(d time.Duration) string {
	switch {
	case d > 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.Round(time.Second).String()
}

// withWindow applies the window rule to a listing route's handler.
func withWindow(l listing, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		win, err := resolveWindow(v, time.Now())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		r.URL.RawQuery = v.Encode()
		rec := getRecorder(w)
		defer putRecorder(rec)
		h(rec, r)
		rec.finish(l, &win)
	}
}

// recorders pools windowRecorders with their buffers: most answers are held
// whole (up to maxEmptyListing), and a buffer per query was a tenth of a
// search's allocations during heavy ingest.
var recorders sync.Pool // of *windowRecorder

func getRecorder(w http.ResponseWriter) *windowRecorder {
	rec, _ := recorders.Get().(*windowRecorder)
	if rec == nil {
		rec = new(windowRecorder)
	}
	rec.ResponseWriter, rec.code = w, http.StatusOK
	return rec
}

// putRecorder pools rec once its handler and finish have returned (nothing
// keeps a listing's writer after that).
func putRecorder(rec *windowRecorder) {
	rec.buf.Reset()
	room := rec.buf.AvailableBuffer() // the buffer's array, empty
	*rec = windowRecorder{}
	if cap(room) <= 2*maxEmptyListing {
		rec.buf = *bytes.NewBuffer(room)
	}
	recorders.Put(rec)
}

// windowRecorder adds the window, and the hint of an empty answer, to a
// listing's successful JSON answer. It holds the answer while it is small
// (an empty listing is); past maxEmptyListing bytes the answer has items,
// and it is passed on as written but for its last bytes, so that a large
// answer is not copied. Anything else (errors, other content types)
// passes through untouched.
type windowRecorder struct {
	http.ResponseWriter
	code      int
	hold      bool // a listing answer: held in buf, or streamed with its tail in buf
	streaming bool // the head of the answer was passed on; buf holds its last bytes
	decided   bool
	buf       bytes.Buffer
}

// withheld is how many of the last bytes a streamed answer keeps back:
// enough for its closing brace and trailing white space.
const withheld = 16

func (rw *windowRecorder) WriteHeader(code int) {
	if rw.decided {
		return
	}
	rw.decided, rw.code = true, code
	rw.hold = code == http.StatusOK && strings.HasPrefix(rw.Header().Get("Content-Type"), "application/json")
	if !rw.hold {
		rw.ResponseWriter.WriteHeader(code)
		return
	}
	rw.Header().Del("Content-Length") // the answer grows
}

func (rw *windowRecorder) Write(p []byte) (int, error) {
	if !rw.decided {
		rw.WriteHeader(http.StatusOK)
	}
	if !rw.hold {
		return rw.ResponseWriter.Write(p)
	}
	if !rw.streaming && rw.buf.Len()+len(p) <= maxEmptyListing {
		return rw.buf.Write(p)
	}
	if !rw.streaming {
		rw.streaming = true
		rw.ResponseWriter.WriteHeader(rw.code)
	}
	// Pass on all but the last withheld bytes of what is held and p.
	size := len(p)
	held := rw.buf.Len()
	if n := held + len(p) - withheld; n > 0 {
		if n < held {
			if _, err := rw.ResponseWriter.Write(rw.buf.Next(n)); err != nil {
				return 0, err
			}
		} else {
			if _, err := rw.ResponseWriter.Write(rw.buf.Bytes()); err != nil {
				return 0, err
			}
			rw.buf.Reset()
			if _, err := rw.ResponseWriter.Write(p[:n-held]); err != nil {
				return 0, err
			}
			p = p[n-held:]
		}
	}
	rw.buf.Write(p)
	return size, nil
}

// finish writes what is held with "window" (and "hint") added before the
// answer's closing brace.
func (rw *windowRecorder) finish(l listing, win *windowJSONField) {
	if !rw.hold {
		return
	}
	if !rw.streaming {
		rw.ResponseWriter.WriteHeader(rw.code)
	}
	body := bytes.TrimRight(rw.buf.Bytes(), " \n")
	if len(body) == 0 || body[len(body)-1] != '}' || !rw.streaming && len(body) < 2 {
		rw.ResponseWriter.Write(rw.buf.Bytes())
		return
	}
	extra, _ := json.Marshal(win)
	tail := make([]byte, 0, len(extra)+256)
	if rw.streaming || len(bytes.TrimSpace(body[:len(body)-1])) > 1 { // not "{}"
		tail = append(tail, ',')
	}
	tail = append(tail, `"window":`...)
	tail = append(tail, extra...)
	if !rw.streaming && emptyListing(body, l.field) {
		h, _ := json.Marshal(emptyHint(l.noun, win, "since="))
		tail = append(append(tail, `,"hint":`...), h...)
	}
	tail = append(tail, "}\n"...)
	rw.ResponseWriter.Write(body[:len(body)-1])
	rw.ResponseWriter.Write(tail)
}

// maxEmptyListing bounds the answers emptyListing decodes: an answer with
// no items holds only its envelope (a window, totals, a few warnings), far
// below this, so a larger one has items and is not read again.
const maxEmptyListing = 64 << 10

// emptyListing reports whether the answer's items field is absent, null or
// an empty array. It reads the answer's top-level object only as far as
// that field and skips the values before it without decoding them: the
// field usually comes first, and decoding a page of spans to look at its
// first byte cost a search about a tenth of its server time
// (docs/benchmarks/search-live.md). A body that is not a JSON object, or
// that breaks off before the field, reports false (no hint), as a body
// that does not decode did before.
func emptyListing(body []byte, field string) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return true // {}: no items field
	}
	for i < len(body) {
		end := skipString(body, i)
		if end < 0 {
			return false
		}
		key := body[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 { // an escaped key: decode it
			var k string
			if json.Unmarshal(body[i:end], &k) != nil {
				return false
			}
			key = []byte(k)
		}
		i = skipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		vend := skipValue(body, i)
		if vend < 0 {
			return false
		}
		if string(key) == field {
			v := body[i:vend]
			if string(v) == "null" {
				return true
			}
			return v[0] == '[' && skipSpace(v, 1) == len(v)-1
		}
		i = skipSpace(body, vend)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case '}':
			return true // the object ended without the field
		case ',':
			i = skipSpace(body, i+1)
		default:
			return false
		}
	}
	return false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string that starts at i,
// or -1 when none does.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON value that starts at i, or
// -1 when the value breaks off. It matches brackets and skips strings; it
// does not check numbers and literals (the answers are the server's own).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ { // a number or a literal
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if j == i {
				return -1
			}
			return j
		}
	}
	return -1
}

// inWindow puts "in" before a description that needs it: "in the last
// 24h", "in all time", but "since ...", "from ... to ...".
func inWindow(desc string) string {
	if strings.HasPrefix(desc, "the ") || strings.HasPrefix(desc, "all time") {
		return "in " + desc
	}
	return desc
}

// emptyHint is the sentence of an empty answer: "no spans in the last 24h;
// try since=7d". The CLI writes the same with --since (flag is "--since ").
func emptyHint(noun string, win *windowJSONField, flag string) string {
	msg := "no " + noun + " " + inWindow(win.Description)
	if win.Wider != "" {
		msg += "; try " + flag + win.Wider
	}
	return msg
}
