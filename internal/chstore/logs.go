package chstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/otlp"
	"github.com/rastro-dev/rastro/internal/store"
	"github.com/rastro-dev/rastro/internal/text"
)

// Logs on ClickHouse (store.LogBackend): one row per record in logs,
// written by the spans' write path (the same queue, batches, inserters and
// admission: append.go), with the columns a search filters on (time,
// sequence number, trace and span ids, service, severity, the hashes of the
// record's words) and the record itself as OTLP protobuf.
//
// Sequence numbers order records of the same time and make the cursor: a
// process numbers the records it accepts from its clock in nanoseconds,
// strictly increasing (nextSeq). Two processes on one database number
// independently; their records of the same time interleave by these numbers.
//
// A search reads a page of (time, seq) keys, newest first, from the light
// columns (the words as hasAll over their hashes: the tokenizer and hash of
// the embedded log store, internal/text), then the records of those keys;
// Query.Match and erasures are applied in Go, a page at a time, until the
// answer is full. An erasure of a trace's records (EraseTrace) is recorded
// in log_erasures, hides the records at once (every process reads that
// table on each search) and starts an ALTER TABLE logs DELETE that removes
// them in the background.

const logsTable = `CREATE TABLE IF NOT EXISTS logs (
	project String,
	time UInt64,
	seq UInt64,
	trace_id FixedString(16),
	span_id FixedString(8),
	service String,
	severity Int32,
	words Array(UInt64),
	record String
) ENGINE = MergeTree
PARTITION BY toDate(toDateTime(intDiv(time, 1000000000)))
ORDER BY (project, time, seq)`

const logErasuresTable = `CREATE TABLE IF NOT EXISTS log_erasures (
	project String,
	trace_id FixedString(16),
	before UInt64,
	at UInt64
) ENGINE = MergeTree ORDER BY (project, trace_id)`

var _ store.LogBackend = (*Store)(nil)

// logQueryTimeout bounds one log search or erasure (the interface has no
// context).
const logQueryTimeout = time.Minute

// nextSeqs reserves n sequence numbers, the first no lower than the clock
// in nanoseconds, above every number given before.
func (s *Store) nextSeqs(n int) uint64 {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	first := max(uint64(time.Now().UnixNano()), s.seq+1)
	s.seq = first + uint64(n) - 1
	return first
}

// AppendLogs decodes one export request and returns once ClickHouse has
// acknowledged the insert of its records.
func (s *Store) AppendLogs(project string, format store.LogFormat, body []byte) (store.LogResult, error) {
	var b otlp.LogBatch
	var err error
	switch format {
	case store.LogFormatProto:
		b, err = otlp.DecodeLogsProto(body)
	case store.LogFormatJSON:
		b, err = otlp.DecodeLogsJSON(body)
	case store.LogFormatNative:
		b, err = otlp.DecodeNativeLogs(body)
	default:
		return store.LogResult{}, fmt.Errorf("unknown log format %d", format)
	}
	if err != nil {
		return store.LogResult{}, err
	}
	res := store.LogResult{Accepted: len(b.Records), Rejected: b.Rejected, RejectMsg: b.RejectMsg, Problems: b.Problems}
	if len(b.Records) == 0 {
		return res, nil
	}
	// A record with neither time is given the time it was received, as
	// the embedded log store does.
	now := uint64(s.opts.Now().UnixNano())
	for i := range b.Records {
		if b.Records[i].Time() == 0 {
			b.Records[i].ObservedTimeUnixNano = now
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), logQueryTimeout)
	defer cancel()
	if err := s.enqueue(ctx, &pending{project: project, logs: b.Records}); err != nil {
		return store.LogResult{}, err
	}
	return res, nil
}

// logWords are the distinct hashes of a record's words (body and string
// attributes, nested values included), as the embedded log store indexes
// them.
func logWords(r *model.LogRecord) []uint64 {
	var out []uint64
	var walk func(v model.Value)
	walk = func(v model.Value) {
		switch v.Type {
		case model.ValueString:
			text.Tokens(v.Str, func(tok string) { out = append(out, text.Hash(tok)) })
		case model.ValueArray:
			for _, e := range v.Elems() {
				walk(e)
			}
		case model.ValueKvList:
			for _, f := range v.Fields() {
				walk(f.Value)
			}
		}
	}
	walk(r.Body)
	for _, kv := range r.Attributes {
		walk(kv.Value)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// queryWords are the distinct hashes of a query's words.
func queryWords(q string) []uint64 {
	var out []uint64
	text.Tokens(q, func(tok string) { out = append(out, text.Hash(tok)) })
	slices.Sort(out)
	return slices.Compact(out)
}

// insertLogs writes the batch's log records as one block.
func (s *Store) insertLogs(ctx context.Context, batch []*pending) error {
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO logs (project, time, seq, trace_id, span_id, service, severity, words, record)")
	if err != nil {
		return fmt.Errorf("insert into ClickHouse: %w", err)
	}
	one := make([]model.LogRecord, 1)
	for _, p := range batch {
		for i := range p.logs {
			r := &p.logs[i]
			one[0] = *r
			if err := b.Append(p.project, r.Time(), p.seq+uint64(i), string(r.TraceID[:]), string(r.SpanID[:]), r.Service,
				int32(r.SeverityNumber), logWords(r), string(otlp.EncodeLogsProto(one))); err != nil {
				b.Abort()
				return fmt.Errorf("insert into ClickHouse: log row: %w", err)
			}
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into ClickHouse: logs: %w", err)
	}
	return nil
}

// logErasures are a project's erased traces, each with the first sequence
// number its erasure left alone.
func (s *Store) logErasures(ctx context.Context, project string) (map[model.TraceID]uint64, error) {
	rows, err := s.conn.Query(ctx, "SELECT trace_id, max(before) FROM log_erasures WHERE project = ? GROUP BY trace_id", project)
	if err != nil {
		return nil, fmt.Errorf("read log erasures from ClickHouse: %w", err)
	}
	defer rows.Close()
	out := map[model.TraceID]uint64{}
	for rows.Next() {
		var id string
		var before uint64
		if err := rows.Scan(&id, &before); err != nil {
			return nil, fmt.Errorf("read log erasures from ClickHouse: %w", err)
		}
		out[model.TraceID([]byte(id))] = before
	}
	return out, rows.Err()
}

// logWhere selects q's records by its window, ids, service, severity and
// words (not its cursor, Match or erasures).
func (s *Store) logWhere(q *store.LogQuery) (*where, bool) {
	since, until := s.window(q.Project, q.Since, q.Until)
	w := &where{}
	w.add("project = ?", q.Project)
	if since != 0 {
		w.add("time >= ?", since)
	}
	if until != 0 {
		if until <= since {
			return w, false
		}
		w.add("time < ?", until)
	}
	if !q.TraceID.IsZero() {
		w.add("trace_id = unhex(?)", hexID(q.TraceID))
	}
	if !q.SpanID.IsZero() {
		w.add("span_id = unhex(?)", q.SpanID.String())
	}
	if q.Service != "" {
		w.add("service = ?", q.Service)
	}
	if q.MinSeverity > 0 {
		w.add("severity >= ?", int32(q.MinSeverity))
	}
	if words := queryWords(q.Text); len(words) > 0 {
		w.add("hasAll(words, ?)", words)
	}
	return w, true
}

// SearchLogs returns the newest records matching q.
func (s *Store) SearchLogs(q store.LogQuery) (store.LogPage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logQueryTimeout)
	defer cancel()
	if err := s.usable(ctx); err != nil {
		return store.LogPage{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var page store.LogPage
	w, ok := s.logWhere(&q)
	if !ok {
		return page, nil
	}
	erased, err := s.logErasures(ctx, q.Project)
	if err != nil {
		return page, err
	}
	last := q.Before
	var hits []store.LogHit
	for size := min(max(2*(limit+1), minCandidatePage), maxCandidatePage); ; size = min(4*size, maxCandidatePage) {
		kw := &where{conds: slices.Clone(w.conds), args: slices.Clone(w.args)}
		if last != nil {
			kw.add("(time < ? OR time = ? AND seq < ?)", last.Time, last.Time, last.Seq)
		}
		keys, err := s.logKeys(ctx, kw, size)
		if err != nil {
			return page, err
		}
		recs, err := s.logRecords(ctx, q.Project, keys)
		if err != nil {
			return page, err
		}
		for _, k := range keys {
			last = &store.LogCursor{Time: k.Time, Seq: k.Seq}
			r, ok := recs[k]
			if !ok {
				continue // removed between the two steps
			}
			if before, ok := erased[r.TraceID]; ok && k.Seq < before {
				continue
			}
			if q.Match != nil && !q.Match(r) {
				continue
			}
			hits = append(hits, store.LogHit{Seq: k.Seq, Record: *r})
			if len(hits) > limit {
				h := hits[limit-1]
				page.Hits, page.Next = hits[:limit], &store.LogCursor{Time: h.Record.Time(), Seq: h.Seq}
				return page, nil
			}
		}
		if len(keys) < size {
			page.Hits = hits
			return page, nil
		}
	}
}

// logKeys returns up to n keys of the records w selects, newest first.
func (s *Store) logKeys(ctx context.Context, w *where, n int) ([]store.LogCursor, error) {
	rows, err := s.conn.Query(ctx, "SELECT time, seq FROM logs WHERE "+w.String()+" ORDER BY time DESC, seq DESC LIMIT ?", append(w.args, n)...)
	if err != nil {
		return nil, fmt.Errorf("search logs in ClickHouse: %w", err)
	}
	defer rows.Close()
	var out []store.LogCursor
	for rows.Next() {
		var k store.LogCursor
		if err := rows.Scan(&k.Time, &k.Seq); err != nil {
			return nil, fmt.Errorf("search logs in ClickHouse: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// logRecords reads the records of keys (newest first, as logKeys gives them).
func (s *Store) logRecords(ctx context.Context, project string, keys []store.LogCursor) (map[store.LogCursor]*model.LogRecord, error) {
	out := make(map[store.LogCursor]*model.LogRecord, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	seqs := make([]uint64, len(keys))
	for i, k := range keys {
		seqs[i] = k.Seq
	}
	rows, err := s.conn.Query(ctx, "SELECT time, seq, record FROM logs WHERE project = ? AND time >= ? AND time <= ? AND has(?, seq)",
		project, keys[len(keys)-1].Time, keys[0].Time, seqs)
	if err != nil {
		return nil, fmt.Errorf("read logs from ClickHouse: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k store.LogCursor
		var rec string
		if err := rows.Scan(&k.Time, &k.Seq, &rec); err != nil {
			return nil, fmt.Errorf("read logs from ClickHouse: %w", err)
		}
		b, err := otlp.DecodeLogsProto([]byte(rec))
		if err != nil || len(b.Records) != 1 {
			return nil, fmt.Errorf("log record %d.%d: stored record does not decode (%v): %w", k.Time, k.Seq, err, store.ErrCorruption)
		}
		out[k] = &b.Records[0]
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read logs from ClickHouse: %w", err)
	}
	return out, nil
}

// EraseTrace hides the project's records of trace acknowledged before the
// call (in every process, at once) and starts their removal (a mutation);
// it returns how many it hid.
func (s *Store) EraseTrace(project string, trace model.TraceID) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), logQueryTimeout)
	defer cancel()
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	// Records acknowledged before now carry lower numbers from this
	// process; those of other processes, numbers from their clocks.
	before := s.nextSeqs(1)
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM logs WHERE project = ? AND trace_id = unhex(?) AND seq < ?",
		project, hexID(trace), before).Scan(&n); err != nil {
		return 0, fmt.Errorf("count logs to erase in ClickHouse: %w", err)
	}
	if err := insertRow(ctx, s.conn, s.quorum, "INSERT INTO log_erasures (project, trace_id, before, at)", project, string(trace[:]), before, uint64(time.Now().UnixNano())); err != nil {
		return 0, fmt.Errorf("record log erasure in ClickHouse: %w", err)
	}
	if err := s.conn.Exec(ctx, s.target.onLocals("ALTER TABLE logs DELETE WHERE project = ? AND trace_id = unhex(?) AND seq < ?"), project, hexID(trace), before); err != nil {
		// Hidden already; the removal is started again by the next
		// erasure of the trace.
		s.opts.Logger.Error("clickhouse: removing an erased trace's logs not started", "project", project, "trace", hexID(trace), "err", err)
	}
	return int(n), nil
}

// EraseTraces is EraseTrace for many traces: one batch of erasure rows, one
// count and one mutation.
func (s *Store) EraseTraces(project string, traces []model.TraceID) (int, error) {
	if len(traces) == 0 {
		return 0, nil
	}
	if len(traces) == 1 {
		return s.EraseTrace(project, traces[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), logQueryTimeout)
	defer cancel()
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	before := s.nextSeqs(1)
	at := uint64(time.Now().UnixNano())
	if err := insertBlock(ctx, s.conn, s.quorum, "INSERT INTO log_erasures (project, trace_id, before, at)", func(b driver.Batch) error {
		for _, t := range traces {
			if err := b.Append(project, string(t[:]), before, at); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("record log erasure in ClickHouse: %w", err)
	}
	// This batch's rows share its before, which no other erasure has.
	const batch = "trace_id IN (SELECT trace_id FROM log_erasures WHERE project = ? AND before = ?)"
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM logs WHERE project = ? AND seq < ? AND "+batch,
		project, before, project, before).Scan(&n); err != nil {
		return 0, fmt.Errorf("count logs to erase in ClickHouse: %w", err)
	}
	if err := s.conn.Exec(ctx, s.target.onLocals("ALTER TABLE logs DELETE WHERE project = ? AND seq < ? AND "+batch), project, before, project, before); err != nil {
		s.opts.Logger.Error("clickhouse: removing erased traces' logs not started", "project", project, "traces", len(traces), "err", err)
	}
	return int(n), nil
}

// Live log tails see the records this process acknowledged, as span tails do.

// logTail is one live tail of logs.
type logTail struct {
	s       *Store
	q       store.LogQuery
	words   []uint64
	mu      sync.Mutex
	pending []model.LogRecord
	dropped int64
	closed  bool
	wake    chan struct{} // 1-buffered
}

// maxLogTails bounds the live log tails open at once; logTailQueue the
// records one holds for its reader (past it, records are dropped and
// counted).
const (
	maxLogTails  = 32
	logTailQueue = 10_000
)

// TailLogs follows q.Project's records acknowledged by this process that
// match q's filters (not its window, limit or cursor).
func (s *Store) TailLogs(q store.LogQuery) (store.LogTail, error) {
	if s.w.isClosed() {
		return nil, store.ErrClosed
	}
	q.Since, q.Until, q.Before = 0, 0, nil
	t := &logTail{s: s, q: q, words: queryWords(q.Text), wake: make(chan struct{}, 1)}
	s.logTailMu.Lock()
	defer s.logTailMu.Unlock()
	if len(s.logTails) >= maxLogTails {
		return nil, fmt.Errorf("%d live log tails are open, the most at once: close one or retry later", maxLogTails)
	}
	s.logTails = append(s.logTails, t)
	return t, nil
}

// offerLogs hands every tail the acknowledged records of one request.
func (s *Store) offerLogs(project string, recs []model.LogRecord) {
	s.logTailMu.Lock()
	defer s.logTailMu.Unlock()
	for _, t := range s.logTails {
		t.offer(project, recs)
	}
}

// closeLogTails ends every tail (Close).
func (s *Store) closeLogTails() {
	s.logTailMu.Lock()
	tails := s.logTails
	s.logTails = nil
	s.logTailMu.Unlock()
	for _, t := range tails {
		t.end()
	}
}

func (t *logTail) match(r *model.LogRecord) bool {
	q := &t.q
	if r.SeverityNumber < q.MinSeverity || (!q.TraceID.IsZero() && r.TraceID != q.TraceID) ||
		(!q.SpanID.IsZero() && r.SpanID != q.SpanID) || (q.Service != "" && r.Service != q.Service) {
		return false
	}
	if len(t.words) > 0 {
		have := logWords(r)
		for _, h := range t.words {
			if _, ok := slices.BinarySearch(have, h); !ok {
				return false
			}
		}
	}
	return q.Match == nil || q.Match(r)
}

func (t *logTail) offer(project string, recs []model.LogRecord) {
	if project != t.q.Project {
		return
	}
	t.mu.Lock()
	n := 0
	for i := range recs {
		if !t.match(&recs[i]) {
			continue
		}
		if len(t.pending) >= logTailQueue {
			t.dropped++
			continue
		}
		t.pending = append(t.pending, recs[i])
		n++
	}
	t.mu.Unlock()
	if n > 0 {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Next implements store.LogTail.
func (t *logTail) Next(ctx context.Context) ([]model.LogRecord, int64, error) {
	for {
		t.mu.Lock()
		recs, dropped, closed := t.pending, t.dropped, t.closed
		t.pending, t.dropped = nil, 0
		t.mu.Unlock()
		if len(recs) > 0 || dropped > 0 {
			return recs, dropped, nil
		}
		if closed {
			return nil, 0, store.ErrClosed
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-t.wake:
		}
	}
}

// Close implements store.LogTail.
func (t *logTail) Close() {
	s := t.s
	s.logTailMu.Lock()
	for i, x := range s.logTails {
		if x == t {
			s.logTails = append(s.logTails[:i:i], s.logTails[i+1:]...)
			break
		}
	}
	s.logTailMu.Unlock()
	t.end()
}

func (t *logTail) end() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}
