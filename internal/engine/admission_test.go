package engine

import "testing"

// TestBufferUsageByProject: each project's share of the write buffer's
// estimate adds up to the whole, grows with what the project sends, and
// goes back to nothing once sealed.
func TestBufferUsageByProject(t *testing.T) {
	e := openTest(t, t.TempDir())
	defer e.Close()
	g := newGen(9)
	appendSpans(t, e, "big", g.spans(60))
	appendSpans(t, e, "small", g.spans(5))
	big, total, limit := e.BufferUsage("big")
	small, _, _ := e.BufferUsage("small")
	none, _, _ := e.BufferUsage("absent")
	if big+small != total || none != 0 || limit != e.opts.MaxBufferBytes {
		t.Fatalf("big %d + small %d != total %d (absent %d, limit %d)", big, small, total, none, limit)
	}
	if big <= 4*small {
		t.Fatalf("big %d is not well above small %d for 12 times the traces", big, small)
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if big, total, _ := e.BufferUsage("big"); big != 0 || total != 0 {
		t.Fatalf("after the seal: big %d, total %d", big, total)
	}
}
