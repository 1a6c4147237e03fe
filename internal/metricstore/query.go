package metricstore

import (
	"slices"
	"sync"

	"github.com/rastro-dev/rastro/internal/parallel"
	"github.com/rastro-dev/rastro/internal/store"
)

// view is what a query reads: the heads' matching series decoded under the
// read lock, and the blocks, each referenced until the query is done.
type view struct {
	mem    []store.SeriesData
	memEx  []store.SeriesExemplars
	blocks []*block
}

func (v *view) release() {
	for _, b := range v.blocks {
		b.release()
	}
}

func (s *Store) view(project string, mint, maxt int64, ms []*store.LabelMatcher, samples bool) (*view, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	v := &view{}
	var matched []*memSeries
	work := 0
	for _, h := range []*head{s.sealing, s.head} {
		if h == nil {
			continue
		}
		for _, l := range h.series {
			for _, m := range l {
				if m.project != project || m.count() == 0 || m.minT > maxt || m.maxT() < mint || !store.MatchLabels(m.labels, ms) {
					continue
				}
				matched = append(matched, m)
				work += m.count()
			}
		}
	}
	// The matched series' chunks are decoded on several CPUs when they hold
	// many samples (internal/parallel), still under the read lock (an append
	// rewrites a chunk's last byte), each part into its own scratch and
	// arena, so that only the samples in [mint, maxt] are kept.
	decoded := make([][]store.Sample, len(matched))
	if samples {
		parallel.Parts(len(matched), work, func(lo, hi int) {
			var (
				scratch []store.Sample
				arena   sampleArena
			)
			for k := lo; k < hi; k++ {
				scratch = matched[k].appendSamples(scratch[:0], mint, maxt)
				if len(scratch) > 0 {
					decoded[k] = arena.copy(scratch)
				}
			}
		})
	}
	for k, m := range matched {
		sd := store.SeriesData{Labels: m.labels}
		if samples {
			if len(decoded[k]) == 0 {
				continue
			}
			sd.Samples = decoded[k]
		}
		v.mem = append(v.mem, sd)
		if len(m.exemplars) > 0 {
			v.memEx = append(v.memEx, store.SeriesExemplars{Labels: m.labels, Exemplars: slices.Clone(m.exemplars)})
		}
	}
	for _, b := range s.blocks {
		if b.maxT < mint || b.minT > maxt {
			continue
		}
		b.acquire()
		v.blocks = append(v.blocks, b)
	}
	return v, nil
}

// SelectSeries implements store.MetricBackend.
func (s *Store) SelectSeries(project string, mint, maxt int64, ms []*store.LabelMatcher) ([]store.SeriesData, error) {
	v, err := s.view(project, mint, maxt, ms, true)
	if err != nil {
		return nil, err
	}
	defer v.release()
	byKey := map[string]int{}
	var out []store.SeriesData
	merged := map[int]bool{}
	add := func(ls store.Labels, samples []store.Sample) {
		k := ls.Key()
		if i, ok := byKey[k]; ok {
			out[i].Samples = append(out[i].Samples, samples...)
			merged[i] = true
			return
		}
		byKey[k] = len(out)
		out = append(out, store.SeriesData{Labels: ls, Samples: samples})
	}
	// Each chunk is read into one buffer and decoded into one scratch
	// slice, and only its samples in [mint, maxt] are kept, in a few shared
	// slabs: a query over part of a block allocates the samples it answers,
	// not one chunk's worth per series.
	// The chunks are decoded on several CPUs when there are many samples
	// (internal/parallel), each part into its own buffers, then added in
	// block order.
	type job struct {
		b  *block
		bs *blockSeries
	}
	var jobs []job
	work := 0
	for _, b := range v.blocks {
		for i := range b.series {
			bs := &b.series[i]
			if bs.project != project || bs.maxT < mint || bs.minT > maxt || !store.MatchLabels(bs.labels, ms) {
				continue
			}
			jobs = append(jobs, job{b, bs})
			work += bs.n
		}
	}
	decoded := make([][]store.Sample, len(jobs))
	var (
		errMu    sync.Mutex
		firstErr error
	)
	parallel.Parts(len(jobs), work, func(lo, hi int) {
		var (
			raw     []byte
			scratch []store.Sample
			arena   sampleArena
		)
		for k := lo; k < hi; k++ {
			b, bs := jobs[k].b, jobs[k].bs
			if cap(raw) < bs.chunkLen {
				raw = make([]byte, bs.chunkLen)
			}
			if cap(scratch) < bs.n {
				scratch = make([]store.Sample, 0, bs.n)
			}
			ss, err := b.samples(bs, mint, maxt, raw, scratch[:0])
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				return
			}
			if len(ss) > 0 {
				decoded[k] = arena.copy(ss)
			}
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for k, ss := range decoded {
		if len(ss) > 0 {
			add(jobs[k].bs.labels, ss)
		}
	}
	for _, sd := range v.mem {
		add(sd.Labels, sd.Samples)
	}
	// A series in several blocks (or a block and the head) is sorted and
	// its repeated times kept once (the later source's value).
	for i := range merged {
		ss := out[i].Samples
		slices.SortStableFunc(ss, func(a, b store.Sample) int { return cmpInt(a.T, b.T) })
		w := 0
		for j := range ss {
			if w > 0 && ss[w-1].T == ss[j].T {
				ss[w-1] = ss[j]
				continue
			}
			ss[w] = ss[j]
			w++
		}
		out[i].Samples = ss[:w]
	}
	slices.SortFunc(out, func(a, b store.SeriesData) int { return store.CompareLabels(a.Labels, b.Labels) })
	return out, nil
}

// sampleArena hands out copies of sample slices from a few large slabs
// rather than one allocation per series. Each copy's capacity is its
// length, so appending to one (merging a series found in several sources)
// reallocates it and never writes over the next.
type sampleArena struct{ slab []store.Sample }

// Slab sizes grow from minSlab to maxSlab samples (16 B each) so that a
// small query does not allocate a large slab.
const (
	minSlab = 1 << 10
	maxSlab = 1 << 16
)

func (a *sampleArena) copy(ss []store.Sample) []store.Sample {
	if cap(a.slab)-len(a.slab) < len(ss) {
		a.slab = make([]store.Sample, 0, max(len(ss), min(max(2*cap(a.slab), minSlab), maxSlab)))
	}
	i := len(a.slab)
	a.slab = append(a.slab, ss...)
	return a.slab[i:len(a.slab):len(a.slab)]
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SeriesLabels implements store.MetricBackend.
func (s *Store) SeriesLabels(project string, mint, maxt int64, ms []*store.LabelMatcher) ([]store.Labels, error) {
	v, err := s.view(project, mint, maxt, ms, false)
	if err != nil {
		return nil, err
	}
	defer v.release()
	seen := map[string]bool{}
	var out []store.Labels
	add := func(ls store.Labels) {
		if k := ls.Key(); !seen[k] {
			seen[k] = true
			out = append(out, ls)
		}
	}
	for _, b := range v.blocks {
		for i := range b.series {
			bs := &b.series[i]
			if bs.project == project && bs.maxT >= mint && bs.minT <= maxt && store.MatchLabels(bs.labels, ms) {
				add(bs.labels)
			}
		}
	}
	for _, sd := range v.mem {
		add(sd.Labels)
	}
	slices.SortFunc(out, store.CompareLabels)
	return out, nil
}

// Exemplars implements store.MetricBackend.
func (s *Store) Exemplars(project string, mint, maxt int64, ms []*store.LabelMatcher) ([]store.SeriesExemplars, error) {
	v, err := s.view(project, mint, maxt, ms, false)
	if err != nil {
		return nil, err
	}
	defer v.release()
	byKey := map[string]int{}
	var out []store.SeriesExemplars
	add := func(ls store.Labels, es []store.MetricExemplar) {
		var keep []store.MetricExemplar
		for _, e := range es {
			if e.T >= mint && e.T <= maxt {
				keep = append(keep, e)
			}
		}
		if len(keep) == 0 {
			return
		}
		k := ls.Key()
		if i, ok := byKey[k]; ok {
			out[i].Exemplars = append(out[i].Exemplars, keep...)
			return
		}
		byKey[k] = len(out)
		out = append(out, store.SeriesExemplars{Labels: ls, Exemplars: keep})
	}
	for _, b := range v.blocks {
		for i := range b.series {
			bs := &b.series[i]
			if bs.project == project && len(bs.exemplars) > 0 && store.MatchLabels(bs.labels, ms) {
				add(bs.labels, bs.exemplars)
			}
		}
	}
	for _, se := range v.memEx {
		add(se.Labels, se.Exemplars)
	}
	for i := range out {
		slices.SortStableFunc(out[i].Exemplars, func(a, b store.MetricExemplar) int { return cmpInt(a.T, b.T) })
	}
	slices.SortFunc(out, func(a, b store.SeriesExemplars) int { return store.CompareLabels(a.Labels, b.Labels) })
	return out, nil
}

// appendSamples appends to out the samples with mint <= t <= maxt.
func (m *memSeries) appendSamples(out []store.Sample, mint, maxt int64) []store.Sample {
	out, err := m.app.samples(mint, maxt, out)
	if err != nil {
		panic("metricstore: a head chunk does not decode (broken invariant): " + err.Error())
	}
	if m.hasLast && m.last.T >= mint && m.last.T <= maxt {
		out = append(out, m.last)
	}
	return out
}
