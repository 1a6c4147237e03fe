package chstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rastro-dev/rastro/internal/llm"
	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/store"
)

// pending is one Append (spans) or AppendLogs (log records) waiting for
// its insert.
type pending struct {
	project string
	spans   []model.Span
	logs    []model.LogRecord
	seq     uint64     // the sequence number of logs[0] (logs.go)
	bytes   int64      // what it counts against Options.MaxWALBytes (walfront.go)
	done    chan error // receives the insert's outcome, once
}

// size is what the request counts against the queue.
func (p *pending) size() int { return len(p.spans) + len(p.logs) }

// writer is the write path: a bounded queue, one collector that forms
// batches, and the inserters. Goroutines: start runs the collector and
// Options.Inserters inserters; stop closes the queue, the collector drains
// it and closes the batch channel, the inserters drain that and exit; stop
// returns when all have.
type writer struct {
	s *Store

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan *pending

	queued  atomic.Int64 // spans accepted and not yet acknowledged
	batches chan []*pending
	wg      sync.WaitGroup
}

func (w *writer) start(s *Store) {
	w.s = s
	w.queue = make(chan *pending, 4096)
	w.batches = make(chan []*pending)
	w.wg.Add(1 + s.opts.Inserters)
	go w.collect()
	for range s.opts.Inserters {
		go w.insertLoop()
	}
}

func (w *writer) isClosed() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.closed
}

func (w *writer) stop() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// collect gathers queued writes for up to BatchWindow (or MaxBatchSpans)
// and hands each batch to a free inserter; while every inserter is busy
// the next batch keeps growing (group commit).
func (w *writer) collect() {
	defer w.wg.Done()
	defer close(w.batches)
	window, most := w.s.opts.BatchWindow, w.s.opts.MaxBatchSpans
	for first := range w.queue {
		batch, n := []*pending{first}, first.size()
		timer := time.NewTimer(window)
	gather:
		for n < most {
			select {
			case p, ok := <-w.queue:
				if !ok {
					break gather
				}
				batch, n = append(batch, p), n+p.size()
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		// Every inserter busy: the batch keeps growing until one is free
		// (or it is full). Each insert costs ClickHouse a new part in every
		// table the spans reach, whatever its size: fewer, larger inserts
		// cost it less per span (BenchmarkInsertBlock).
	handOver:
		for n < most {
			select {
			case w.batches <- batch:
				batch = nil
				break handOver
			case p, ok := <-w.queue:
				if !ok {
					break handOver
				}
				batch, n = append(batch, p), n+p.size()
			}
		}
		if batch != nil {
			w.batches <- batch
		}
	}
}

func (w *writer) insertLoop() {
	defer w.wg.Done()
	for batch := range w.batches {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := w.s.insertQuorum(ctx, batch)
		cancel()
		for _, p := range batch {
			w.queued.Add(-int64(p.size()))
			p.done <- err
			if err == nil && len(p.spans) > 0 {
				w.s.tails.Offer(p.project, p.spans)
			}
			if err == nil && len(p.logs) > 0 {
				w.s.offerLogs(p.project, p.logs)
			}
		}
	}
}

// Append queues w's spans for the next batch and returns once ClickHouse
// has acknowledged their insert (with a WAL in front of ClickHouse,
// Options.WALDir: once the request is fsynced in the WAL, walfront.go). A
// full queue fails at once with store.ErrOverloaded; an insert ClickHouse
// refused or never answered fails with its error (the spans may or may not
// be stored: a retry is safe, a re-sent span replaces its copy).
func (s *Store) Append(ctx context.Context, wr *store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(wr.Spans) == 0 {
		return nil
	}
	llm.Enrich(wr.Spans, s.opts.Prices)
	// A write without its request (Import's copies) cannot be logged: it
	// is inserted and acknowledged as without a WAL.
	if s.wf != nil && len(wr.Body) > 0 {
		return s.wf.append(wr)
	}
	return s.enqueue(ctx, &pending{project: wr.Project, spans: wr.Spans})
}

// enqueue queues p for the next batch and waits for its insert (Append).
func (s *Store) enqueue(ctx context.Context, p *pending) error {
	w := &s.w
	n := int64(p.size())
	p.done = make(chan error, 1)
	if len(p.logs) > 0 {
		p.seq = s.nextSeqs(len(p.logs))
	}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return store.ErrClosed
	}
	if q := w.queued.Add(n); q > int64(s.opts.MaxQueuedSpans) && q != n {
		w.queued.Add(-n)
		w.mu.RUnlock()
		return fmt.Errorf("ClickHouse insert queue holds %d spans and log records (at most %d): %w", q-n, s.opts.MaxQueuedSpans, store.ErrOverloaded)
	}
	select {
	case w.queue <- p:
	default:
		w.queued.Add(-n)
		w.mu.RUnlock()
		return fmt.Errorf("ClickHouse insert queue holds %d requests: %w", cap(w.queue), store.ErrOverloaded)
	}
	w.mu.RUnlock()
	// A write under way completes: its outcome is awaited whatever ctx does.
	return <-p.done
}

// Columns of an insert into spans, in the order row gives them.
const spanColumns = `project, trace_id, span_id, parent_span_id, start, end, duration, ingested, service, name, kind, status, status_message,
	span_attr_keys, span_attr_types, span_attr_str, span_attr_int, span_attr_float,
	res_attr_keys, res_attr_types, res_attr_str, res_attr_int, res_attr_float,
	llm, llm_provider, llm_request_model, llm_response_model, llm_operation, llm_session, llm_user, llm_agent, llm_tool,
	llm_input_tokens, llm_output_tokens, llm_cache_read_tokens, llm_cache_creation_tokens, llm_reasoning_tokens,
	llm_cost_nano_usd, llm_cost_source, llm_ttft, llm_counted, body`

// maxHotValue is the longest attribute value kept in the hot text column;
// a longer one is typeLong there (its text is only in body).
const maxHotValue = 1024

// typeLong marks an attribute whose value is longer than maxHotValue.
const typeLong = 255

// attrCols are one scope's attribute arrays.
type attrCols struct {
	keys   []string
	types  []uint8
	str    []string
	ints   []int64
	floats []float64
}

// insert writes a batch: the trace index first, then the spans, so that a
// failure between the two leaves at worst an index row without spans
// (harmless), never spans a trace lookup cannot find; then the log records.
// now is the spans' ingested time (the same in a retry, so that its blocks
// are the same: quorum.go).
func (s *Store) insert(ctx context.Context, batch []*pending, now uint64) error {
	if err := s.insertSpans(ctx, batch, now); err != nil {
		return err
	}
	for _, p := range batch {
		if len(p.logs) > 0 {
			return s.insertLogs(ctx, batch)
		}
	}
	return nil
}

func (s *Store) insertSpans(ctx context.Context, batch []*pending, now uint64) error {
	if !slices.ContainsFunc(batch, func(p *pending) bool { return len(p.spans) > 0 }) {
		return nil
	}
	type traceKey struct {
		project string
		id      model.TraceID
	}
	ranges := map[traceKey][2]uint64{}
	for _, p := range batch {
		for i := range p.spans {
			sp := &p.spans[i]
			k := traceKey{p.project, sp.TraceID}
			r, ok := ranges[k]
			if !ok {
				r = [2]uint64{sp.StartTimeUnixNano, sp.StartTimeUnixNano}
			}
			r[0], r[1] = min(r[0], sp.StartTimeUnixNano), max(r[1], sp.StartTimeUnixNano)
			ranges[k] = r
		}
	}
	ib, err := s.conn.PrepareBatch(ctx, "INSERT INTO trace_index (project, trace_id, start_min, start_max)")
	if err != nil {
		return fmt.Errorf("insert into ClickHouse: %w", err)
	}
	for k, r := range ranges {
		if err := ib.Append(k.project, string(k.id[:]), r[0], r[1]); err != nil {
			ib.Abort()
			return fmt.Errorf("insert into ClickHouse: trace index row: %w", err)
		}
	}
	if err := ib.Send(); err != nil {
		return fmt.Errorf("insert into ClickHouse: trace index: %w", err)
	}
	sb, err := s.conn.PrepareBatch(ctx, "INSERT INTO spans ("+spanColumns+")")
	if err != nil {
		return fmt.Errorf("insert into ClickHouse: %w", err)
	}
	blk := spanBlocks.Get().(*spanBlock)
	defer func() {
		blk.reset()
		spanBlocks.Put(blk)
	}()
	for _, p := range batch {
		for i := range p.spans {
			if err := blk.add(sb, p.project, &p.spans[i], now); err != nil {
				sb.Abort()
				return fmt.Errorf("insert into ClickHouse: span row: %w", err)
			}
		}
	}
	if err := blk.flush(sb); err != nil {
		sb.Abort()
		return fmt.Errorf("insert into ClickHouse: span rows: %w", err)
	}
	if err := sb.Send(); err != nil {
		return fmt.Errorf("insert into ClickHouse: spans: %w", err)
	}
	s.spanInserts.Add(1)
	return nil
}
