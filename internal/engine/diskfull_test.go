package engine

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// TestDiskFullRefusesWritesKeepsReadsAndResumes: on a full disk an append
// fails with an error that says so (ENOSPC) and stores nothing, queries
// keep answering, a seal that cannot write its segment leaves the spans in
// the buffer and the WAL, and once space returns appends and seals work
// again by themselves; a restart then serves exactly the acknowledged spans.
func TestDiskFullRefusesWritesKeepsReadsAndResumes(t *testing.T) {
	m := vfs.NewMemFS()
	disk := vfs.NewDisk(1 << 30)
	opts := Options{Dir: "/data", FS: &vfs.Faulty{FS: m, Inject: disk.Inject}, BlockSpans: 16, NoCompaction: true}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	g := newGen(5)
	acked := map[string]bool{}
	try := func(spans []model.Span) error {
		body := otlp.EncodeProto(spans)
		b, err := otlp.DecodeProto(body)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Append(context.Background(), &store.Write{Project: "p", Type: otlp.RecordOTLPProto, Body: body, Spans: b.Spans})
		if err == nil {
			for i := range spans {
				acked[key(&spans[i])] = true
			}
		}
		return err
	}
	first := g.spans(10)
	if err := try(first); err != nil {
		t.Fatal(err)
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := try(g.spans(5)); err != nil { // in the buffer and the WAL
		t.Fatal(err)
	}

	disk.SetFree(0)
	refused := g.spans(5)
	err = try(refused)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want an error wrapping ENOSPC", err)
	}
	if got := searchAll(t, e, "p", &query.Filter{}, 1000); len(got) != len(acked) {
		t.Fatalf("queries on a full disk: %d spans, want %d", len(got), len(acked))
	}
	if err := e.Seal(); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("seal on a full disk: %v, want ENOSPC", err)
	}
	if got := searchAll(t, e, "p", &query.Filter{}, 1000); len(got) != len(acked) {
		t.Fatalf("after a failed seal: %d spans, want %d", len(got), len(acked))
	}

	// Room for the WAL's next file but not for the segment: the seal fails
	// after freezing the buffer, which keeps serving.
	disk.SetFree(200)
	if err := e.Seal(); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("seal without room for its segment: %v, want ENOSPC", err)
	}
	if got := searchAll(t, e, "p", &query.Filter{}, 1000); len(got) != len(acked) {
		t.Fatalf("after a failed segment write: %d spans, want %d", len(got), len(acked))
	}

	disk.SetFree(1 << 30)
	if err := try(refused); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	if err := e.Seal(); err != nil {
		t.Fatalf("seal once space is back: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts.FS = m.Crash(vfs.CrashOptions{})
	if e, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	got := searchAll(t, e, "p", &query.Filter{}, 1000)
	seen := map[string]bool{}
	for i := range got {
		k := key(&got[i])
		if seen[k] || !acked[k] {
			t.Fatalf("after restart: span %s served twice or never acknowledged", k)
		}
		seen[k] = true
	}
	if len(seen) != len(acked) {
		t.Fatalf("after restart: %d spans, acknowledged %d", len(seen), len(acked))
	}
}
