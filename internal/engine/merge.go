package engine

import (
	"context"
	"fmt"
	"iter"
	"math/bits"
	"path/filepath"
	"slices"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/segment"
)

// The streaming merge behind compaction, retention rewrites and erasure
// rewrites. It reads a run of adjacent published segments block by block and
// writes one segment through segment.Writer, so its memory is one decoded
// block per input plus the output's block and index, whatever the inputs'
// sizes (docs/operations.md gives the cost model).
//
// Segment order is (project, trace start, trace id, span start, span id),
// and a trace may be split over several inputs (its spans arrived on both
// sides of a seal). Before merging, the inputs' trace indexes (sorted by
// trace id) are intersected as streams to find the split traces; when the
// merge reaches a split trace in the input where it starts first, it reads
// the trace's other parts from the other inputs and writes the whole trace
// at once: a part whose input's cursor is at it (a re-sent copy of the whole
// trace sorts to the same place) is taken from the cursor, any other by a
// trace index lookup, and those inputs skip it when they reach it. Within a
// split trace, the newest input's copy of a re-sent span wins, as it does in
// queries.

// mergeInput is the read cursor of one input segment.
type mergeInput struct {
	h     *segHandle
	idx   int // position in the run, oldest first: a higher idx holds newer copies
	block int // next block to read
	spans []model.Span
	pos   int
	proj  string // project of the spans being read
}

// fill makes spans[pos] the next span, reading the next block if needed; it
// reports false at the end of the input.
func (in *mergeInput) fill() (bool, error) {
	for in.pos >= len(in.spans) {
		if in.block >= len(in.h.blocks) {
			in.spans = nil
			return false, nil
		}
		spans, err := in.h.r.ReadBlock(in.block)
		if err != nil {
			return false, fmt.Errorf("read segment %s block %d: %w", in.h.name, in.block, err)
		}
		in.spans, in.pos, in.proj = spans, 0, in.h.blocks[in.block].Project
		in.block++
	}
	return true, nil
}

func (in *mergeInput) head() *model.Span { return &in.spans[in.pos] }

// less orders input heads in segment order; ties go to the older input.
func (in *mergeInput) less(o *mergeInput) bool {
	if in.proj != o.proj {
		return in.proj < o.proj
	}
	a, b := in.head(), o.head()
	if a.StartTimeUnixNano != b.StartTimeUnixNano {
		return a.StartTimeUnixNano < b.StartTimeUnixNano
	}
	if a.TraceID != b.TraceID {
		return string(a.TraceID[:]) < string(b.TraceID[:])
	}
	return in.idx < o.idx
}

// headOf returns the position in live of input idx when its head is the
// first span of trace id in proj, else -1.
func headOf(live []*mergeInput, idx int, proj string, id model.TraceID) int {
	for k, in := range live {
		if in.idx == idx {
			if in.proj == proj && in.head().TraceID == id {
				return k
			}
			return -1
		}
	}
	return -1
}

// takeTrace appends the spans of the trace at the head to dst and advances
// past them (a trace larger than a block continues in the next block).
func (in *mergeInput) takeTrace(dst []model.Span) ([]model.Span, error) {
	proj, id := in.proj, in.head().TraceID
	for {
		for in.pos < len(in.spans) && in.spans[in.pos].TraceID == id {
			dst = append(dst, in.spans[in.pos])
			in.pos++
		}
		if in.pos < len(in.spans) {
			return dst, nil
		}
		ok, err := in.fill()
		if err != nil || !ok {
			return dst, err
		}
		if in.proj != proj || in.head().TraceID != id {
			return dst, nil
		}
	}
}

// splitTraces returns the traces held by two inputs or more, each with the
// bit set of the inputs holding it (bit i = inputs[i]). It streams the
// inputs' trace indexes; its memory is the result.
func splitTraces(inputs []*mergeInput) (map[traceKey]uint64, error) {
	type stream struct {
		next func() (traceKey, bool)
		stop func()
		cur  traceKey
		ok   bool
		err  error
	}
	ss := make([]*stream, len(inputs))
	for i, in := range inputs {
		st := &stream{}
		r := in.h.r
		seq := func(yield func(traceKey) bool) {
			st.err = r.TraceIDs(func(p string, id model.TraceID) bool { return yield(traceKey{p, id}) })
		}
		st.next, st.stop = iter.Pull(iter.Seq[traceKey](seq))
		defer st.stop()
		st.cur, st.ok = st.next()
		ss[i] = st
	}
	less := func(a, b traceKey) bool {
		if a.project != b.project {
			return a.project < b.project
		}
		return string(a.trace[:]) < string(b.trace[:])
	}
	out := map[traceKey]uint64{}
	for {
		var min traceKey
		have := false
		for _, s := range ss {
			if s.ok && (!have || less(s.cur, min)) {
				min, have = s.cur, true
			}
		}
		if !have {
			break
		}
		var mask uint64
		for i, s := range ss {
			if s.ok && s.cur == min {
				mask |= 1 << i
				s.cur, s.ok = s.next()
			}
		}
		if bits.OnesCount64(mask) > 1 {
			out[min] = mask
		}
	}
	for i, s := range ss {
		if s.err != nil {
			return nil, fmt.Errorf("read trace index of segment %s: %w", inputs[i].h.name, s.err)
		}
	}
	return out, nil
}

// dropFunc reports whether a span is left out of a merge's output (expired by
// retention, or part of an erased trace).
type dropFunc func(project string, s *model.Span) bool

// mergeResult describes one merge.
type mergeResult struct {
	h        *segHandle // the output, opened; nil when every span was dropped
	info     segment.Info
	dropped  int64 // spans left out by the drop function
	dupes    int64 // older copies of re-sent spans left out
	bytesIn  int64
	took     time.Duration
	inputIDs []string
}

// maxMergeInputs bounds a run (split-trace masks are 64-bit).
const maxMergeInputs = 64

// merge writes the spans of run (adjacent published segments, oldest first)
// as one segment named name, leaving out the spans drop reports. The output
// is complete, fsynced and opened, but not published: the caller publishes
// it (replaceSegments) or removes it.
func (e *Engine) merge(ctx context.Context, run []*segHandle, name string, drop dropFunc) (mergeResult, error) {
	start := time.Now()
	res := mergeResult{}
	if len(run) == 0 || len(run) > maxMergeInputs {
		return res, fmt.Errorf("merge: %d inputs (want 1 to %d)", len(run), maxMergeInputs)
	}
	inputs := make([]*mergeInput, len(run))
	for i, h := range run {
		inputs[i] = &mergeInput{h: h, idx: i}
		res.bytesIn += h.info.Bytes
		res.inputIDs = append(res.inputIDs, h.name)
	}
	split := map[traceKey]uint64{}
	if len(run) > 1 {
		var err error
		if split, err = splitTraces(inputs); err != nil {
			return res, fmt.Errorf("merge into %s: %w", name, err)
		}
	}
	wo := e.writerOptions()
	wo.AnyTraceOrder = true
	w, err := segment.NewWriter(e.dir, name, wo)
	if err != nil {
		return res, err
	}
	fail := func(err error) (mergeResult, error) {
		w.Abort()
		return res, fmt.Errorf("merge into %s: %w", name, err)
	}
	live := inputs[:0:0]
	for _, in := range inputs {
		ok, err := in.fill()
		if err != nil {
			return fail(err)
		}
		if ok {
			live = append(live, in)
		}
	}
	rv := e.newResolver(nil)
	resolved := 0
	var trace, part []model.Span
	for len(live) > 0 {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		best := 0
		for i := 1; i < len(live); i++ {
			if live[i].less(live[best]) {
				best = i
			}
		}
		in := live[best]
		proj, id := in.proj, in.head().TraceID
		trace, err = in.takeTrace(trace[:0])
		if err != nil {
			return fail(err)
		}
		if ok, err := in.fill(); err != nil {
			return fail(err)
		} else if !ok {
			live = slices.Delete(live, best, best+1)
		}
		key := traceKey{proj, id}
		if mask, isSplit := split[key]; isSplit {
			if mask&(1<<in.idx) == 0 {
				continue // written already, with its part in an earlier input
			}
			// The first part reached: gather the others, then mark them
			// to be skipped where their inputs reach them.
			parts := mask &^ (1 << in.idx)
			var dd dedup
			trace = dd.add(trace, trace, in.idx, &res.dupes)
			for rest := parts; rest != 0; rest &= rest - 1 {
				j := bits.TrailingZeros64(rest)
				var more []model.Span
				if k := headOf(live, j, proj, id); k >= 0 {
					// A part that starts where this one does (a re-sent
					// copy of the whole trace) is at the head of its
					// input: taken from there, it costs no index lookup
					// and no second read of its block.
					if more, err = live[k].takeTrace(part[:0]); err != nil {
						return fail(err)
					}
					part = more
					if ok, err := live[k].fill(); err != nil {
						return fail(err)
					} else if !ok {
						live = slices.Delete(live, k, k+1)
					}
				} else if more, err = run[j].r.FindTrace(proj, id); err != nil {
					return fail(fmt.Errorf("segment %s: trace %s: %w", run[j].name, id, err))
				}
				trace = dd.add(trace, more, j, &res.dupes)
			}
			split[key] = 0 // no input has it left to write; later visits skip it
			if parts != 0 {
				sortByStart(trace)
			}
		}
		kept := trace[:0]
		for i := range trace {
			if drop != nil && drop(proj, &trace[i]) {
				res.dropped++
				continue
			}
			kept = append(kept, trace[i])
		}
		if len(kept) == 0 {
			continue
		}
		// Values stored apart come back as references: resolve them so
		// that the output's token and attribute filters see the text (the
		// writer stores them again: already present, so not rewritten).
		for i := range kept {
			if spanHasRefs(&kept[i]) {
				failed := len(rv.failed)
				kept[i] = rv.span(&kept[i])
				if len(rv.failed) != failed {
					return fail(fmt.Errorf("trace %s: a stored value is unreadable (see the log)", id))
				}
				if resolved++; resolved%4096 == 0 {
					rv = e.newResolver(nil) // bound the resolver's cache
				}
			}
		}
		if err := w.Append(proj, kept); err != nil {
			return fail(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", name, err)
	}
	res.info = info
	path := filepath.Join(e.dir, name)
	if info.Spans == 0 {
		e.fs.Remove(path)
		res.took = time.Since(start)
		return res, nil
	}
	if info.ValueRefs > 0 {
		if err := e.values.Sync(); err != nil {
			e.fs.Remove(path)
			return res, fmt.Errorf("merge into %s: sync value store: %w", name, err)
		}
	}
	r, err := e.opts.openSegment(path)
	if err != nil {
		e.fs.Remove(path)
		return res, fmt.Errorf("merge into %s: reopen: %w", name, err)
	}
	res.h = newSegHandle(name, r)
	res.took = time.Since(start)
	return res, nil
}

// dedup gathers the parts of a split trace, keeping one copy of each span
// id: the one from the newest input (highest index).
type dedup struct {
	pos map[model.SpanID]int // span id -> index in the trace
	src []int                // input index of each span of the trace
}

// add adds part (from input idx) to trace and returns it. The first call
// passes the trace itself as part.
func (d *dedup) add(trace, part []model.Span, idx int, dupes *int64) []model.Span {
	first := d.pos == nil
	if first {
		d.pos = make(map[model.SpanID]int, len(part))
		trace = trace[:0:len(trace)]
	}
	for i := range part {
		s := part[i]
		j, dup := d.pos[s.SpanID]
		switch {
		case !dup:
			d.pos[s.SpanID] = len(trace)
			trace = append(trace, s)
			d.src = append(d.src, idx)
		case idx > d.src[j]:
			trace[j], d.src[j] = s, idx
			*dupes++
		default:
			*dupes++
		}
	}
	return trace
}
