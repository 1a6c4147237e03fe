package engine

import (
	"context"

	"github.com/rastro-dev/rastro/internal/model"
	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/segment"
)

// llmBufferPart gathers the LLM aggregate entries of the write buffers mems
// for project and f, projected onto p (the buffers' part of llmEntries). A
// full chunk inside the window answers from its partial aggregates when the
// filter allows (aggregatesUsable), p keeps neither session nor user (the
// chunk's aggregates are coarse), none of its rows was superseded and no
// erased trace has a row in it; any other chunk that meets the window is
// read row by row, decoding only its rows with LLM fields that start in the
// window.
func (e *Engine) llmBufferPart(ctx context.Context, mems []*memtable, project string, f *query.Filter, p projection) ([]segment.AggEntry, error) {
	f = e.visible(project, f)
	usable := aggregatesUsable(f) && p.coarse()
	hs := e.hidden()
	var erased []model.TraceID
	for k := range hs.traces {
		if k.project == project {
			erased = append(erased, k.trace)
		}
	}
	rows := segment.NewAggregator()
	var stored []segment.AggEntry
	d := spanDecoder{reuse: true}
	for _, m := range mems {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pid, ok := m.projectID(project)
		if !ok {
			continue
		}
		tainted := m.traceChunks(project, erased)
		for i, cv := range m.chunkViews() {
			lo, hi := cv.c.minStart.Load(), cv.c.maxStart.Load()
			if !overlaps(lo, hi, f.Start, f.End) {
				continue
			}
			if usable && !tainted[i] && inWindow(lo, hi, f.Start, f.End) {
				if entries, ok := cv.aggregates(pid); ok {
					stored = append(stored, entries...)
					continue
				}
			}
			m.scanLLMRows(cv, pid, f.Start, f.End, &d, func(s *model.Span) {
				if !hs.has(project, s.TraceID) && f.Match(s) {
					rows.Add(s)
				}
			})
		}
	}
	return p.apply(append(stored, rows.Entries()...)), nil
}

// scanRows calls fn with each live row of project that starts in [start,
// end) (0: unbounded), only the rows with LLM fields when llmOnly, decoded
// into scratch valid during the call. Rows of other projects, outside the
// window or without LLM fields are not decoded.
func (m *memtable) scanRows(project string, start, end uint64, llmOnly bool, fn func(s *model.Span)) {
	pid, ok := m.projectID(project)
	if !ok {
		return
	}
	d := spanDecoder{reuse: true}
	for _, cv := range m.chunkViews() {
		if !overlaps(cv.c.minStart.Load(), cv.c.maxStart.Load(), start, end) {
			continue
		}
		if llmOnly {
			m.scanLLMRows(cv, pid, start, end, &d, fn)
			continue
		}
		a := m.arena()
		for i := 0; i < cv.rows; i++ {
			r := &cv.c.rows[i]
			if r.project != pid || !r.liveFor(cv.n) || (start != 0 && r.start < start) || (end != 0 && r.start >= end) {
				continue
			}
			a.materialise(r, &d.s, &d)
			fn(&d.s)
		}
	}
}
