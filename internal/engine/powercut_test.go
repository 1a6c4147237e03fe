package engine

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/vfs"
)

// TestPowerCutAtEverySyncPoint runs the engine over a filesystem that loses
// what was not synced, through ingest, seals, a merge, an erasure and a
// retention sweep, and takes the image a power cut would leave just before
// every file sync and directory sync (WAL, segments, value store, manifest,
// erasure list). The store reopened on each image must serve every span
// acknowledged before the cut exactly once, no span of an erasure
// acknowledged before the cut, and no span retention had expired.
func TestPowerCutAtEverySyncPoint(t *testing.T) {
	const dir = "/data"
	t0 := time.Unix(0, 1_700_000_000_000_000_000)
	var clock atomic.Int64
	clock.Store(t0.Add(time.Hour).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }

	m := vfs.NewMemFS()
	var (
		mu     sync.Mutex
		syncs  atomic.Int64
		images []*vfs.MemFS
		clocks []int64 // the clock when each image was taken
		what   []string
		rng    = rand.New(rand.NewPCG(3, 3))
	)
	fs := &vfs.Faulty{FS: m, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			mu.Lock()
			n := len(images)
			images = append(images, m.Crash(vfs.CrashOptions{KeepDirOps: n%2 == 1, Torn: n%3 == 1, Rand: rng}))
			clocks = append(clocks, clock.Load())
			what = append(what, op.String()+" "+name)
			syncs.Add(1)
			mu.Unlock()
		}
		return vfs.Fault{}
	}}
	opts := Options{Dir: dir, FS: fs, BlockSpans: 16, NoCompaction: true, Retention: 24 * time.Hour,
		EraseDelay: time.Hour, ValueThreshold: 64, now: now}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()

	g := newGen(11)
	g.base = uint64(t0.UnixNano())
	old := g.spans(20) // expires when the clock moves on
	g.base = uint64(t0.Add(72 * time.Hour).UnixNano())
	young := g.spans(40)
	for i := range young { // some values long enough to go to the value store
		if i%3 == 0 {
			young[i].Attributes = append(young[i].Attributes, model.KeyValue{Key: "gen_ai.prompt",
				Value: model.StringValue("a long prompt for span " + key(&young[i]) + string(make([]byte, 100)))})
		}
	}

	// ackedAt: span key -> syncs begun when its append returned.
	ackedAt := map[string]int64{}
	appendAcked := func(spans []model.Span) {
		for len(spans) > 0 {
			n := min(len(spans), 20)
			appendSpans(t, e, "p", spans[:n])
			at := syncs.Load()
			for i := range spans[:n] {
				ackedAt[key(&spans[i])] = at
			}
			spans = spans[n:]
		}
	}
	appendAcked(old)
	appendAcked(young[:15])
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	appendAcked(young[15:30])
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Compact(context.Background()); err != nil || res.Merges == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	// Erase the traces of one user: every span stored by then of a trace
	// with a span of theirs (spans of such a trace sent later stay).
	// Acknowledged once Erase returns.
	stored := append(append([]model.Span(nil), old...), young[:30]...)
	traces := map[model.TraceID]bool{}
	for _, s := range stored {
		if v, _ := s.Attr("user"); v.Str == "u3" {
			traces[s.TraceID] = true
		}
	}
	erased := map[string]bool{}
	for i := range stored {
		if traces[stored[i].TraceID] {
			erased[key(&stored[i])] = true
		}
	}
	if len(erased) == 0 {
		t.Fatal("test premise: some traces to erase")
	}
	if _, err := e.Erase(context.Background(), store.EraseRequest{Project: "p", Query: `{ span.user = "u3" }`}); err != nil {
		t.Fatal(err)
	}
	eraseAckedAt := syncs.Load()
	if err := e.EraseNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendAcked(young[30:])
	clock.Store(t0.Add(48 * time.Hour).UnixNano()) // the old spans expire
	if err := e.SweepRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if len(images) < 30 {
		t.Fatalf("only %d sync points", len(images))
	}

	all := append(append([]model.Span(nil), old...), young...)
	expired := map[string]bool{}
	for i := range old {
		expired[key(&old[i])] = true
	}
	for k, img := range images {
		o := opts
		o.FS = img
		c := clocks[k]
		o.now = func() time.Time { return time.Unix(0, c) }
		e2, err := Open(o)
		if err != nil {
			t.Fatalf("image %d: open: %v", k, err)
		}
		got := searchAll(t, e2, "p", &query.Filter{}, 1000)
		seen := map[string]bool{}
		for i := range got {
			kk := key(&got[i])
			if seen[kk] {
				t.Fatalf("image %d: span %s served twice", k, kk)
			}
			seen[kk] = true
			if _, ok := ackedAt[kk]; !ok {
				t.Fatalf("image %d: unknown span %s", k, kk)
			}
			if int64(k) >= eraseAckedAt && erased[kk] {
				for j := max(0, k-20); j <= k; j++ {
					t.Logf("sync %d: %s", j, what[j])
				}
				for j := range all {
					if all[j].TraceID == got[i].TraceID {
						t.Logf("span %s of the trace: index %d in all (old %d, young %d), acknowledged at %d", key(&all[j]), j, len(old), len(young), ackedAt[key(&all[j])])
					}
				}
				t.Fatalf("image %d (power cut before sync %d, the erasure acknowledged at %d): erased span %s of trace %s is back",
					k, k, eraseAckedAt, kk, got[i].TraceID)
			}
			if c >= t0.Add(48*time.Hour).UnixNano() && expired[kk] {
				t.Fatalf("image %d: expired span %s served", k, kk)
			}
		}
		for i := range all {
			kk := key(&all[i])
			at, ok := ackedAt[kk]
			if !ok || at > int64(k) || erased[kk] && int64(k) >= eraseAckedAt ||
				expired[kk] && c >= t0.Add(48*time.Hour).UnixNano() {
				continue
			}
			if !seen[kk] {
				for j := max(0, k-6); j <= k; j++ {
					t.Logf("sync %d: %s", j, what[j])
				}
				t.Fatalf("image %d (power cut before %s): acknowledged span %s (acknowledged at %d, expired %v) lost", k, what[k], kk, at, expired[kk])
			}
			// Values stored apart come back whole.
			if v, ok := all[i].Attr("gen_ai.prompt"); ok {
				tr, res, err := e2.Trace(context.Background(), "p", all[i].TraceID)
				if err != nil || len(res.Warnings) > 0 {
					t.Fatalf("image %d: trace %s: %v %v", k, all[i].TraceID, err, res.Warnings)
				}
				for j := range tr {
					if tr[j].SpanID == all[i].SpanID {
						if w, _ := tr[j].Attr("gen_ai.prompt"); w.Str != v.Str {
							t.Fatalf("image %d: span %s's stored value reads back as %.40q", k, kk, w.Str)
						}
					}
				}
			}
		}
		if err := e2.Close(); err != nil {
			t.Fatalf("image %d: close: %v", k, err)
		}
	}
}
