package logstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/durable"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/text"
	"github.com/rastro-dev/rastro/internal/vfs"
	"github.com/rastro-dev/rastro/internal/wal"
)

var words = []string{"refund", "order", "timeout", "retry", "connection", "reset", "Café", "naïve", "退款", "payment",
	"declined", "user", "login", "failed", "ok", "started", "GET", "/api/v1/items", "cache", "miss"}

type gen struct {
	r      *rand.Rand
	res    []*model.Resource
	scopes []*model.Scope
	traces []model.TraceID
	t0     uint64
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed+1)), t0: 1_760_000_000_000_000_000}
	for i := range 4 {
		attrs := []model.KeyValue{{Key: "host.name", Value: model.StringValue(fmt.Sprintf("host-%d", i))}}
		if i < 3 {
			attrs = append(attrs, model.KeyValue{Key: "service.name", Value: model.StringValue([]string{"api", "worker", "llm-gateway"}[i])})
		}
		g.res = append(g.res, &model.Resource{Attributes: attrs, SchemaURL: "https://opentelemetry.io/schemas/1.26.0"})
		g.scopes = append(g.scopes, &model.Scope{Name: fmt.Sprintf("scope-%d", i), Version: "1.0"})
	}
	for range 30 {
		var id model.TraceID
		for i := range id {
			id[i] = byte(g.r.Uint32())
		}
		g.traces = append(g.traces, id)
	}
	return g
}

func (g *gen) sentence() string {
	n := 1 + g.r.IntN(6)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[g.r.IntN(len(words))]
	}
	return strings.Join(ws, " ")
}

// records makes a batch; records of one batch share resources and scopes in
// runs, as a real exporter's do.
func (g *gen) records(n int) []model.LogRecord {
	out := make([]model.LogRecord, n)
	res, sc := g.res[g.r.IntN(len(g.res))], g.scopes[g.r.IntN(len(g.scopes))]
	for i := range out {
		if g.r.IntN(8) == 0 {
			res, sc = g.res[g.r.IntN(len(g.res))], g.scopes[g.r.IntN(len(g.scopes))]
		}
		r := model.LogRecord{Resource: res, Scope: sc, SeverityNumber: model.SeverityNumber(g.r.IntN(25)),
			TimeUnixNano: g.t0 + uint64(g.r.IntN(3600))*1e9 + uint64(g.r.IntN(3))}
		r.ObservedTimeUnixNano = r.TimeUnixNano + 5e6
		if g.r.IntN(10) == 0 {
			r.TimeUnixNano = 0 // only an observed time
		}
		r.SeverityText = r.SeverityNumber.String()
		switch g.r.IntN(5) {
		case 0:
			r.Body = model.KvListValue([]model.KeyValue{{Key: "msg", Value: model.StringValue(g.sentence())}, {Key: "n", Value: model.IntValue(int64(i))}})
		case 1:
		default:
			r.Body = model.StringValue(g.sentence())
		}
		if g.r.IntN(3) > 0 {
			tid := g.traces[g.r.IntN(len(g.traces))]
			r.TraceID = tid
			r.SpanID = model.SpanID{byte(1 + g.r.IntN(200)), 2, 3, 4, 5, 6, 7, 8}
			r.Flags = 1
		}
		if g.r.IntN(2) == 0 {
			r.Attributes = []model.KeyValue{{Key: "user.id", Value: model.StringValue(fmt.Sprintf("u%d", g.r.IntN(20)))},
				{Key: "note", Value: model.StringValue(g.sentence())}}
		}
		if g.r.IntN(6) == 0 {
			r.EventName = "app.checkout"
		}
		out[i] = r
	}
	return out
}

// normalized is what the store must give back for r: the decoder's view.
func normalized(t *testing.T, recs []model.LogRecord) []model.LogRecord {
	t.Helper()
	b, err := otlp.DecodeLogsProto(otlp.EncodeLogsProto(recs))
	if err != nil || len(b.Records) != len(recs) {
		t.Fatalf("generated records do not round-trip: %v", err)
	}
	return b.Records
}

func sameRecord(a, b *model.LogRecord) bool {
	return bytes.Equal(otlp.EncodeLogsProto([]model.LogRecord{*a}), otlp.EncodeLogsProto([]model.LogRecord{*b})) && a.Service == b.Service
}

type stored struct {
	project string
	seq     uint64
	rec     model.LogRecord
}

// bruteForce answers q over every accepted record.
func bruteForce(all []stored, q Query) []stored {
	c := compile(q)
	var out []stored
	for _, s := range all {
		r := &s.rec
		h := header{time: r.Time(), seq: s.seq, severity: r.SeverityNumber, traceID: r.TraceID, spanID: r.SpanID, service: r.Service}
		if s.project == q.Project && c.headerMatch(&h) && c.recordMatch(r) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b stored) int {
		if c := cmp.Compare(b.rec.Time(), a.rec.Time()); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	return out
}

func (g *gen) query(all []stored) Query {
	q := Query{Project: []string{"", "acme"}[g.r.IntN(2)], Limit: []int{1, 7, 50, 1000}[g.r.IntN(4)]}
	if g.r.IntN(2) == 0 {
		q.Since = g.t0 + uint64(g.r.IntN(3600))*1e9
		q.Until = q.Since + uint64(g.r.IntN(1800))*1e9
	}
	if g.r.IntN(4) == 0 {
		q.TraceID = g.traces[g.r.IntN(len(g.traces))]
	}
	if g.r.IntN(4) == 0 {
		q.Service = []string{"api", "worker", "llm-gateway", model.UnknownService, "absent"}[g.r.IntN(5)]
	}
	if g.r.IntN(4) == 0 {
		q.MinSeverity = model.SeverityNumber(g.r.IntN(25))
	}
	switch g.r.IntN(4) {
	case 0:
		q.Text = words[g.r.IntN(len(words))]
	case 1:
		q.Text = strings.ToUpper(words[g.r.IntN(len(words))]) + " " + words[g.r.IntN(len(words))]
	case 2:
		if g.r.IntN(3) == 0 {
			q.Text = "absentword"
		}
	}
	if g.r.IntN(8) == 0 {
		q.Match = func(r *model.LogRecord) bool {
			v, ok := model.Lookup(r.Attributes, "user.id")
			return ok && v.Str == "u3"
		}
	}
	return q
}

// checkQuery pages through q with cursors and compares every page with brute force.
func checkQuery(t *testing.T, s *Store, all []stored, q Query) {
	t.Helper()
	want := bruteForce(all, q)
	q.Limit = max(q.Limit, len(want)/8) // at most about eight pages
	var got []Hit
	pages := 0
	for {
		p, err := s.SearchLogs(q)
		if err != nil {
			t.Fatalf("Search(%+v): %v", q, err)
		}
		got = append(got, p.Hits...)
		pages++
		if p.Next == nil {
			break
		}
		if len(p.Hits) != q.Limit {
			t.Fatalf("a page of %d hits (limit %d) has a next cursor", len(p.Hits), q.Limit)
		}
		q.Before = p.Next
		if pages > len(all)+2 {
			t.Fatal("paging does not end")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("query %+v: %d hits over %d pages, brute force %d", q, len(got), pages, len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].seq || !sameRecord(&got[i].Record, &want[i].rec) {
			t.Fatalf("query %+v: hit %d is seq %d %+v, brute force seq %d %+v", q, i, got[i].Seq, got[i].Record, want[i].seq, want[i].rec)
		}
	}
}

// Search equals brute force over the buffer, sealed segments and both,
// across restarts, with paging, for random windows, ids, services,
// severities, words and filters.
func TestSearchEqualsBruteForce(t *testing.T) {
	// Small seals: mostly segments. Large ones: the buffer's chunk
	// summaries do the pruning.
	for _, sealBytes := range []int64{64 << 10, 256 << 20} {
		t.Run(fmt.Sprintf("seal%dKiB", sealBytes>>10), func(t *testing.T) { testSearchEqualsBruteForce(t, sealBytes) })
	}
}

func testSearchEqualsBruteForce(t *testing.T, sealBytes int64) {
	dir := t.TempDir()
	g := newGen(1)
	open := func() *Store {
		s, err := Open(Options{Dir: dir, SealBytes: sealBytes, WALMode: wal.ModeBuffered})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	var all []stored
	var seq uint64
	for round := range 40 {
		project := []string{"", "acme"}[g.r.IntN(2)]
		recs := g.records(1 + g.r.IntN(300))
		format, body := FormatProto, otlp.EncodeLogsProto(recs)
		res, err := s.AppendLogs(project, format, body)
		if err != nil || res.Accepted != len(recs) {
			t.Fatalf("Append: %+v, %v", res, err)
		}
		for _, r := range normalized(t, recs) {
			if r.Time() == 0 {
				t.Fatal("generator made a record with no time")
			}
			all = append(all, stored{project: project, seq: seq, rec: r})
			seq++
		}
		step := round % 10
		if sealBytes > 1<<20 { // let the buffer grow past a few chunks
			step = map[int]int{25: 3, 35: 7}[round]
		}
		switch step {
		case 3:
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
		case 7:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
		}
		for range 5 {
			checkQuery(t, s, all, g.query(all))
		}
	}
	st := s.Stats()
	if st.Records != len(all) || st.Segments == 0 {
		t.Fatalf("Stats = %+v, want %d records in some segments", st, len(all))
	}
	for range 200 {
		checkQuery(t, s, all, g.query(all))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A record that carries neither a time nor an observed time gets the time
// it was received, and keeps it after a restart (the WAL holds it).
func TestRecordWithoutTimeKeepsItsReceiveTime(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s, err := Open(Options{Dir: dir, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"no time at all"}},
		{"timeUnixNano":"5","body":{"stringValue":"has a time"}}]}]}]}`
	if _, err := s.AppendLogs("", FormatJSON, []byte(body)); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, when string) {
		p, err := s.SearchLogs(Query{Text: "time"})
		if err != nil || len(p.Hits) != 2 {
			t.Fatalf("%s: %d hits, %v", when, len(p.Hits), err)
		}
		r := p.Hits[0].Record
		if r.TimeUnixNano != 0 || r.ObservedTimeUnixNano != uint64(at.UnixNano()) || r.Body.Str != "no time at all" {
			t.Fatalf("%s: newest record %+v, want no time and observed %d", when, r, at.UnixNano())
		}
		if o := p.Hits[1].Record; o.TimeUnixNano != 5 || o.ObservedTimeUnixNano != 0 {
			t.Fatalf("%s: older record %+v", when, o)
		}
	}
	check(s, "before restart")
	// A process crash: no seal; the WAL is replayed.
	s.wal.Close()
	s2, err := Open(Options{Dir: dir, Now: func() time.Time { return at.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	check(s2, "after replay")
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	check(s3, "after seal and reopen")
	s3.Close()
}

// A power cut at any moment, also during seals, keeps every acknowledged
// record exactly once.
func TestPowerCutKeepsAcknowledgedRecords(t *testing.T) {
	g := newGen(2)
	fsys := vfs.NewMemFS()
	s, err := Open(Options{Dir: "/data/logs", FS: fsys, SealBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	type image struct {
		fs    *vfs.MemFS
		acked int
	}
	var images []image
	var acked []model.LogRecord
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 30 {
		recs := g.records(1 + g.r.IntN(60))
		if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto(recs)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, normalized(t, recs)...)
		var wg sync.WaitGroup
		if round%4 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.Seal() }()
		}
		for n := range 3 {
			images = append(images, image{fsys.Crash(vfs.CrashOptions{KeepDirOps: n%2 == 1, Torn: n == 2, Rand: rng}), len(acked)})
		}
		wg.Wait()
	}
	s.Close()
	for i, im := range images {
		s, err := Open(Options{Dir: "/data/logs", FS: im.fs})
		if err != nil {
			t.Fatalf("image %d: reopen: %v", i, err)
		}
		p, err := s.SearchLogs(Query{Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Hits) != im.acked {
			t.Fatalf("image %d: %d records after the power cut, %d were acknowledged", i, len(p.Hits), im.acked)
		}
		// Oldest first, the hits are the acknowledged records in order.
		slices.Reverse(p.Hits)
		want := slices.Clone(acked[:im.acked])
		slices.SortStableFunc(want, func(a, b model.LogRecord) int { return cmp.Compare(a.Time(), b.Time()) })
		for j := range want {
			if !sameRecord(&p.Hits[j].Record, &want[j]) {
				t.Fatalf("image %d: record %d differs after the power cut", i, j)
			}
		}
		s.Close()
	}
}

// Damage in a segment is reported as corruption naming the file, never a
// crash or a wrong answer.
func TestCorruptSegmentIsReported(t *testing.T) {
	dir := t.TempDir()
	g := newGen(3)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto(g.records(500))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(dir)
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".rlog") {
			seg = dir + "/" + n.Name()
		}
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[headerSize+10] ^= 0xff // inside the first block
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.SearchLogs(Query{Limit: 1000})
	if !errors.Is(err, durable.ErrCorruption) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("search over a damaged block: %v, want a corruption error naming %s", err, seg)
	}
	// A damaged footer stops Open with the same kind of error.
	s.Close()
	b[len(b)-trailerSize-3] ^= 0xff
	os.WriteFile(seg, b, 0o644)
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, durable.ErrCorruption) {
		t.Fatalf("open with a damaged footer: %v, want corruption", err)
	}
}

// Retention drops whole segments older than the cutoff, for one project or all.
func TestDropBefore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(ts uint64, msg string) []byte {
		return otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: ts, Body: model.StringValue(msg), Resource: &model.Resource{}, Scope: &model.Scope{}}})
	}
	for _, c := range []struct {
		project string
		ts      uint64
	}{{"", 100}, {"acme", 100}, {"", 300}} {
		if _, err := s.AppendLogs(c.project, FormatProto, mk(c.ts, "entry")); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DropBefore(200, func(p string) bool { return p == "" })
	if err != nil || n != 1 {
		t.Fatalf("DropBefore(default project) = %d, %v; want 1", n, err)
	}
	count := func(project string) int {
		p, err := s.SearchLogs(Query{Project: project})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Hits)
	}
	if count("") != 1 || count("acme") != 1 {
		t.Fatalf("after dropping the default project's old segment: %d and %d records, want 1 and 1", count(""), count("acme"))
	}
	if st := s.Stats(); st.Segments != 2 {
		t.Fatalf("%d segments left, want 2", st.Segments)
	}
}

// The words of a query are matched with the span search's tokenizer.
func TestTextUsesTheSharedTokenizer(t *testing.T) {
	var n int
	text.Tokens("Café NAÏVE 退款", func(string) { n++ })
	if n == 0 {
		t.Fatal("the tokenizer emits nothing")
	}
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := model.LogRecord{TimeUnixNano: 1, Body: model.StringValue("Refund for café order: 退款 done"), Resource: &model.Resource{}, Scope: &model.Scope{}}
	if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec})); err != nil {
		t.Fatal(err)
	}
	for _, sealed := range []bool{false, true} {
		if sealed {
			s.Seal()
		}
		for q, want := range map[string]int{"REFUND": 1, "cafe": 1, "退款": 1, "refund absent": 0} {
			p, err := s.SearchLogs(Query{Text: q})
			if err != nil || len(p.Hits) != want {
				t.Errorf("sealed=%v: %q found %d, want %d (%v)", sealed, q, len(p.Hits), want, err)
			}
		}
	}
}

// Erasing a trace removes its records from every answer at once and from
// every file on disk (segments and WAL), survives a power cut, and keeps
// the trace's records acknowledged after it and every other record.
func TestEraseTraceRemovesItsLogsFromDisk(t *testing.T) {
	fsys := vfs.NewMemFS()
	dir := "/data/logs"
	s, err := Open(Options{Dir: dir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	victim := model.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1}
	other := model.TraceID{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1}
	rec := func(trace model.TraceID, ts uint64, body string) []byte {
		return otlp.EncodeLogsProto([]model.LogRecord{{TimeUnixNano: ts, TraceID: trace, Body: model.StringValue(body),
			Resource: &model.Resource{}, Scope: &model.Scope{}}})
	}
	for i := range 30 {
		if _, err := s.AppendLogs("acme", FormatProto, rec(victim, uint64(100+i), fmt.Sprintf("secretprompt%d of the victim", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendLogs("acme", FormatProto, rec(other, uint64(100+i), "ordinary")); err != nil {
			t.Fatal(err)
		}
		if i == 14 {
			if err := s.Seal(); err != nil { // half in a segment, half in the buffer
				t.Fatal(err)
			}
		}
	}
	// The same trace id in another project is not touched.
	if _, err := s.AppendLogs("", FormatProto, rec(victim, 50, "other project")); err != nil {
		t.Fatal(err)
	}
	n, err := s.EraseTrace("acme", victim)
	if err != nil || n != 30 {
		t.Fatalf("EraseTrace = %d, %v; want 30 records removed", n, err)
	}
	after := rec(victim, 200, "arrived after the erasure")
	if _, err := s.AppendLogs("acme", FormatProto, after); err != nil {
		t.Fatal(err)
	}
	count := func(s *Store, project string, trace model.TraceID) int {
		p, err := s.SearchLogs(Query{Project: project, TraceID: trace, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Hits)
	}
	check := func(s *Store, when string) {
		if got := count(s, "acme", victim); got != 1 {
			t.Fatalf("%s: %d records of the erased trace, want only the one sent after the erasure", when, got)
		}
		if count(s, "acme", other) != 30 || count(s, "", victim) != 1 {
			t.Fatalf("%s: other records lost: %d of the other trace, %d in the other project", when, count(s, "acme", other), count(s, "", victim))
		}
	}
	check(s, "after the erasure")
	leaks := func(m *vfs.MemFS) []string {
		var out []string
		for _, name := range m.Names("") {
			b, _ := m.ReadFile(name)
			if bytes.Contains(b, []byte("secretprompt")) {
				out = append(out, name)
			}
			// Segments are compressed: decode them to look.
			if strings.HasSuffix(name, ".rlog") {
				seg, err := openSegment(m, dir, name[len(dir)+1:])
				if err != nil {
					t.Fatal(err)
				}
				for bi := range seg.blocks {
					blk, err := seg.readBlock(bi)
					if err != nil {
						t.Fatal(err)
					}
					all := make([]int, blk.meta.n)
					for i := range all {
						all[i] = i
					}
					pays, err := blk.payloads(all)
					if err != nil {
						t.Fatal(err)
					}
					if bytes.Contains(bytes.Join(pays, nil), []byte("secretprompt")) {
						out = append(out, name)
					}
				}
			}
		}
		return out
	}
	if l := leaks(fsys); len(l) > 0 {
		t.Fatalf("the erased records are still on disk in %v", l)
	}
	image := fsys.Crash(vfs.CrashOptions{})
	s.Close()
	s2, err := Open(Options{Dir: dir, FS: image})
	if err != nil {
		t.Fatal(err)
	}
	check(s2, "after a power cut")
	s2.Close()
}

// When the erasure's own seal fails, the erasure is still durable: after a
// power cut the WAL's copies of the erased records are not replayed.
func TestEraseSurvivesAFailedSeal(t *testing.T) {
	mem := vfs.NewMemFS()
	var failCreates atomic.Bool
	fsys := &vfs.Faulty{FS: mem, Inject: func(op vfs.Op, name string, size int) vfs.Fault {
		if failCreates.Load() && op == vfs.OpCreate && strings.HasSuffix(name, ".rlog.tmp") {
			return vfs.Fault{Err: vfs.Errno(op, name, syscall.EIO)}
		}
		return vfs.Fault{}
	}}
	dir := "/data/logs"
	s, err := Open(Options{Dir: dir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	victim := model.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for i := range 5 {
		body := otlp.EncodeLogsProto([]model.LogRecord{
			{TimeUnixNano: uint64(10 + i), TraceID: victim, Body: model.StringValue("erase me"), Resource: &model.Resource{}, Scope: &model.Scope{}},
			{TimeUnixNano: uint64(10 + i), Body: model.StringValue("keep me"), Resource: &model.Resource{}, Scope: &model.Scope{}},
		})
		if _, err := s.AppendLogs("", FormatProto, body); err != nil {
			t.Fatal(err)
		}
	}
	failCreates.Store(true)
	if _, err := s.EraseTrace("", victim); err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("EraseTrace with segment writes failing: %v, want the EIO", err)
	}
	if p, _ := s.SearchLogs(Query{TraceID: victim}); len(p.Hits) != 0 {
		t.Fatalf("%d erased records still answered", len(p.Hits))
	}
	image := mem.Crash(vfs.CrashOptions{})
	s2, err := Open(Options{Dir: dir, FS: image})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p, err := s2.SearchLogs(Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hits) != 5 {
		t.Fatalf("after the power cut: %d records, want the 5 kept ones", len(p.Hits))
	}
	for _, h := range p.Hits {
		if h.Record.Body.Str != "keep me" {
			t.Fatalf("an erased record came back from the WAL: %+v", h.Record)
		}
	}
	s.Close()
}

// A tail gets the matching records of its project in acknowledgement
// order, counts what it could not hold, and ends when the store closes.
func TestTailLogs(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tail, err := s.TailLogs(Query{Project: "acme", MinSeverity: 17})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(sev model.SeverityNumber, body string) model.LogRecord {
		return model.LogRecord{TimeUnixNano: 1, SeverityNumber: sev, Body: model.StringValue(body), Resource: &model.Resource{}, Scope: &model.Scope{}}
	}
	s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec(9, "info"), rec(17, "first error")}))
	s.AppendLogs("other", FormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec(17, "another project")}))
	s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto([]model.LogRecord{rec(21, "fatal")}))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 2 {
		recs, dropped, err := tail.Next(ctx)
		if err != nil || dropped != 0 {
			t.Fatalf("Next: %v, dropped %d", err, dropped)
		}
		for _, r := range recs {
			got = append(got, r.Body.Str)
		}
	}
	if strings.Join(got, ",") != "first error,fatal" {
		t.Fatalf("tail got %v", got)
	}
	// A reader that falls behind loses records past the queue, counted.
	many := make([]model.LogRecord, tailQueue+5)
	for i := range many {
		many[i] = rec(17, "flood")
	}
	s.AppendLogs("acme", FormatProto, otlp.EncodeLogsProto(many))
	recs, dropped, err := tail.Next(ctx)
	if err != nil || len(recs) != tailQueue || dropped != 5 {
		t.Fatalf("after a flood: %d records, %d dropped, %v; want %d and 5", len(recs), dropped, err, tailQueue)
	}
	s.Close()
	if _, _, err := tail.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}

// The store tells Reserve what its buffers hold, and gives it all back once
// they are sealed.
func TestReserveFollowsTheBuffers(t *testing.T) {
	var held atomic.Int64
	s, err := Open(Options{Dir: t.TempDir(), Reserve: func(d int64) { held.Add(d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := newGen(7)
	for range 5 {
		if _, err := s.AppendLogs("", FormatProto, otlp.EncodeLogsProto(g.records(200))); err != nil {
			t.Fatal(err)
		}
	}
	if n := held.Load(); n < heapPerEstimate*1000*rowBytes {
		t.Fatalf("1,000 buffered records reserve %d bytes, want at least %d", n, heapPerEstimate*1000*rowBytes)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if n := held.Load(); n != 0 {
		t.Fatalf("after the seal %d bytes are still reserved", n)
	}
}
