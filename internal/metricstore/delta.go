package metricstore

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rastro-dev/rastro/internal/store"
)

// Delta temporality is converted to cumulative series in the store, as the
// OpenTelemetry Collector's deltatocumulative processor converts it: every
// series (each le bucket its own) has a running total; a delta point whose
// interval starts at or after the end of the series' previous one adds its
// increase to it and is stored, as the new total, at its own time; a point
// that overlaps the previous one or goes back in time is refused (counted in
// the answer's partialSuccess, with the metric's name).
//
// The conversion runs in apply, in WAL order (the WAL holds the raw
// requests, and replay applies them again in the same order), so replay
// rebuilds the same totals. A total is the value of the series' newest
// stored sample, and the end of its previous interval that sample's time
// (milliseconds): so when the store holds no running total for a series
// (after a restart, or once dropped for idleness, below) it reads them back
// from the newest stored sample (lookupBases, before the WAL append and
// outside the store's lock, as a block read is I/O), and the totals go on
// from where they were. A series with no stored sample starts at zero.
//
// Memory: a running total not used for Options.DeltaIdle is dropped at the
// next seal; its next delta reads it back from storage.
//
// Exponential histograms: the le bounds of a delta point are those of its
// own bucket range, but a stored bucket series is the count of every value
// at or below its bound, so each point is spread over every bound the
// histogram has had (expGroup): a bound above the point's range gets the
// point's whole count, one below nothing. A bound seen for the first time
// starts from the total of the bound below it (no value fell between them
// before, or that bucket would exist).

// deltaInfo is what a delta point's series share: the metric's OTLP name
// (for messages) and the interval's start.
type deltaInfo struct {
	metric string
	start  uint64 // StartTimeUnixNano
}

// expDelta is one delta exponential-histogram point, translated to classic
// buckets (classicBuckets) but not yet to series: apply spreads it over the
// bounds the histogram already has.
type expDelta struct {
	src       int
	info      *deltaInfo
	base      store.Labels // the point's labels, without __name__
	name      string       // the Prometheus name, without _bucket
	t         int64
	buckets   []expBucket
	count     uint64
	sum       float64
	hasSum    bool
	exemplars []store.MetricExemplar
}

// expLe is one bound of an exponential histogram's bucket series.
type expLe struct {
	upper float64
	le    string
}

// runningTotal is a delta series' running total.
type runningTotal struct {
	v    float64
	endT int64 // milliseconds: the time of the newest sample
	used time.Time
}

// expGroup is the set of le bounds (ascending, +Inf apart) of one delta
// exponential histogram's bucket series.
type expGroup struct {
	les  []expLe
	used time.Time
}

func deltaKey(project string, ls store.Labels) string { return project + "\x00" + ls.Key() }

// overlaps reports whether a delta interval starting at start (ns) begins
// before the end of the series' previous one.
func (rt *runningTotal) overlaps(start uint64) bool {
	return rt.endT > 0 && start < uint64(rt.endT)*1e6
}

// lookupBases fills tr.bases and tr.groupLes for the delta series and
// exponential histograms of tr the store holds no running total or bounds
// for: their newest stored samples and bucket bounds, read from the heads
// or else the newest block holding them. It takes s.mu only to read memory
// and the block list; block reads happen without it.
func (s *Store) lookupBases(project string, tr *translation) error {
	if len(tr.expDeltas) == 0 && !slices.ContainsFunc(tr.points, func(p point) bool { return p.delta != nil }) {
		return nil
	}
	want := map[string]store.Labels{}   // series without a running total
	groups := map[string]store.Labels{} // exponential histograms without bounds: their _bucket labels, le aside
	tr.bases = map[string]store.Sample{}
	tr.groupLes = map[string][]expLe{}
	// A running total idle for half of DeltaIdle is looked up too: a seal
	// between now and apply may drop it (apply prefers the one in memory).
	stale := time.Now().Add(-s.opts.DeltaIdle / 2)
	s.mu.RLock()
	need := func(ls store.Labels) {
		if k := deltaKey(project, ls); s.deltas[k] == nil || s.deltas[k].used.Before(stale) {
			want[k] = ls
		}
	}
	for i := range tr.points {
		if tr.points[i].delta != nil {
			need(tr.points[i].labels)
		}
	}
	for i := range tr.expDeltas {
		ed := &tr.expDeltas[i]
		bl := withLabel(ed.base, store.MetricName, ed.name+"_bucket")
		gk := deltaKey(project, bl)
		if g := s.groups[gk]; g != nil {
			for _, l := range g.les {
				need(withLabel(bl, "le", l.le))
			}
		}
		if g := s.groups[gk]; g == nil || g.used.Before(stale) {
			groups[gk] = bl
		}
		for _, b := range ed.buckets {
			need(withLabel(bl, "le", formatLe(b.upper)))
		}
		need(withLabel(bl, "le", "+Inf"))
		need(withLabel(ed.base, store.MetricName, ed.name+"_count"))
		need(withLabel(ed.base, store.MetricName, ed.name+"_sum"))
	}
	// found records a stored series' newest sample, if none newer was.
	found := func(ls store.Labels, last store.Sample) {
		k := deltaKey(project, ls)
		if _, ok := tr.bases[k]; !ok {
			tr.bases[k] = last
		}
		delete(want, k)
	}
	// inGroup records a bucket series of a histogram being looked up.
	inGroup := func(ls store.Labels) (string, bool) {
		if len(groups) == 0 {
			return "", false
		}
		le := ls.Get("le")
		if le == "" || le == "+Inf" {
			return "", false
		}
		gk := deltaKey(project, withoutLabel(ls, "le"))
		if _, ok := groups[gk]; !ok {
			return "", false
		}
		upper, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return "", false
		}
		if !slices.ContainsFunc(tr.groupLes[gk], func(x expLe) bool { return x.le == le }) {
			tr.groupLes[gk] = append(tr.groupLes[gk], expLe{upper, le})
		}
		return gk, true
	}
	for _, h := range []*head{s.head, s.sealing} { // newest first
		if h == nil {
			continue
		}
		for k, ls := range want {
			for _, ms := range h.series[seriesHash(project, ls)] {
				if ms.project == project && labelsEqual(ms.labels, ls) && ms.count() > 0 {
					found(ls, ms.newest())
					delete(want, k)
				}
			}
		}
		if len(groups) > 0 {
			for _, l := range h.series {
				for _, ms := range l {
					if ms.project == project && ms.count() > 0 {
						if _, ok := inGroup(ms.labels); ok {
							found(ms.labels, ms.newest())
						}
					}
				}
			}
		}
	}
	var blocks []*block
	if len(want) > 0 || len(groups) > 0 {
		for _, b := range s.blocks {
			b.acquire()
			blocks = append(blocks, b)
		}
	}
	s.mu.RUnlock()
	defer func() {
		for _, b := range blocks {
			b.release()
		}
	}()
	newest := func(b *block, bs *blockSeries) (store.Sample, error) {
		ss, err := b.samples(bs, bs.maxT, bs.maxT, nil, nil)
		if err != nil {
			return store.Sample{}, fmt.Errorf("read the running total of %s: %w", bs.labels, err)
		}
		if len(ss) == 0 {
			return store.Sample{}, &CorruptionError{File: b.path, Offset: bs.off, Reason: fmt.Sprintf("series %s has no sample at its newest time %d", bs.labels, bs.maxT)}
		}
		return ss[len(ss)-1], nil
	}
	for i := len(blocks) - 1; i >= 0; i-- { // newest first
		b := blocks[i]
		for _, ls := range want {
			j, ok := slices.BinarySearchFunc(b.series, ls, func(bs blockSeries, ls store.Labels) int {
				if bs.project != project {
					if bs.project < project {
						return -1
					}
					return 1
				}
				return store.CompareLabels(bs.labels, ls)
			})
			if !ok {
				continue
			}
			last, err := newest(b, &b.series[j])
			if err != nil {
				return err
			}
			found(ls, last)
		}
		if len(groups) == 0 {
			continue
		}
		for j := range b.series {
			bs := &b.series[j]
			if bs.project != project {
				continue
			}
			if _, ok := inGroup(bs.labels); !ok {
				continue
			}
			if _, ok := tr.bases[deltaKey(project, bs.labels)]; ok {
				continue
			}
			last, err := newest(b, bs)
			if err != nil {
				return err
			}
			found(bs.labels, last)
		}
	}
	for gk := range tr.groupLes {
		slices.SortFunc(tr.groupLes[gk], func(a, b expLe) int { return cmpF(a.upper, b.upper) })
	}
	return nil
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// withoutLabel returns ls without the label name.
func withoutLabel(ls store.Labels, name string) store.Labels {
	out := make(store.Labels, 0, len(ls))
	for _, l := range ls {
		if l.Name != name {
			out = append(out, l)
		}
	}
	return out
}

// newest is the series' newest sample (count() > 0).
func (m *memSeries) newest() store.Sample {
	if m.hasLast {
		return m.last
	}
	ss := m.samples(m.app.t, m.app.t)
	return ss[len(ss)-1]
}

// applyDeltaLocked adds the increases of one OTLP delta point (pts, one per
// series, all of one interval) to their series' running totals and stores
// the totals, or refuses the whole point when its interval starts before
// the end of any of its series' previous one. The first buckets points are
// an exponential histogram's cumulative buckets, ascending: one new to the
// store starts from the total of the one before. It reports whether the
// point was stored.
func (s *Store) applyDeltaLocked(project string, tr *translation, pts []point, buckets int, now time.Time) bool {
	keys := make([]string, len(pts))
	pre := make([]float64, len(pts))
	d := pts[0].delta
	for i := range pts {
		keys[i] = deltaKey(project, pts[i].labels)
		rt := s.deltas[keys[i]]
		if rt == nil {
			if b, ok := tr.bases[keys[i]]; ok {
				rt = &runningTotal{v: b.V, endT: b.T}
			}
		}
		switch {
		case rt != nil && rt.overlaps(d.start):
			tr.accepted--
			tr.reject(1, fmt.Sprintf("metric %q: a delta point whose interval starts before the end of the previous one of its series (%s) was refused: the intervals of one series must not overlap or go back in time",
				d.metric, pts[i].labels))
			return false
		case rt != nil:
			pre[i] = rt.v
		case i > 0 && i < buckets:
			pre[i] = pre[i-1]
		}
	}
	for i := range pts {
		p := &pts[i]
		total := pre[i] + p.v
		if !s.addLocked(project, p, total) {
			tr.markStale(p.src)
			continue
		}
		if rt := s.deltas[keys[i]]; rt != nil {
			rt.v, rt.endT, rt.used = total, p.t, now
		} else {
			s.deltas[keys[i]] = &runningTotal{v: total, endT: p.t, used: now}
		}
	}
	return true
}

// applyExpDeltaLocked spreads a delta exponential-histogram point over the
// bucket bounds its histogram has had and this point's own, and applies it.
func (s *Store) applyExpDeltaLocked(project string, tr *translation, ed *expDelta, now time.Time) {
	bl := withLabel(ed.base, store.MetricName, ed.name+"_bucket")
	gk := deltaKey(project, bl)
	var les []expLe
	if g := s.groups[gk]; g != nil {
		les = g.les
	} else {
		les = tr.groupLes[gk]
	}
	// The union of the bounds, ascending.
	union := make([]expLe, 0, len(les)+len(ed.buckets))
	i, j := 0, 0
	for i < len(les) || j < len(ed.buckets) {
		var next expLe
		switch {
		case j == len(ed.buckets) || (i < len(les) && les[i].upper <= ed.buckets[j].upper):
			next = les[i]
			i++
		default:
			next = expLe{ed.buckets[j].upper, formatLe(ed.buckets[j].upper)}
			j++
		}
		if k := len(union) - 1; k >= 0 && union[k].le == next.le {
			continue
		}
		union = append(union, next)
	}
	bounds := make([]float64, len(union))
	for k, l := range union {
		bounds[k] = l.upper
	}
	// The increase at each bound: the point's values at or below it.
	pts := make([]point, 0, len(union)+3)
	var cum uint64
	j = 0
	for k, l := range union {
		for j < len(ed.buckets) && ed.buckets[j].upper <= l.upper {
			cum += ed.buckets[j].count
			j++
		}
		pts = append(pts, point{src: ed.src, labels: withLabel(bl, "le", l.le), t: ed.t, v: float64(cum), exemplars: exemplarsIn(ed.exemplars, l.upper, k, bounds), delta: ed.info})
	}
	pts = append(pts, point{src: ed.src, labels: withLabel(bl, "le", "+Inf"), t: ed.t, v: float64(ed.count), exemplars: exemplarsIn(ed.exemplars, math.Inf(1), len(bounds), bounds), delta: ed.info})
	nb := len(pts)
	if ed.hasSum {
		pts = append(pts, point{src: ed.src, labels: withLabel(ed.base, store.MetricName, ed.name+"_sum"), t: ed.t, v: ed.sum, delta: ed.info})
	}
	pts = append(pts, point{src: ed.src, labels: withLabel(ed.base, store.MetricName, ed.name+"_count"), t: ed.t, v: float64(ed.count), delta: ed.info})
	if s.applyDeltaLocked(project, tr, pts, nb, now) {
		s.groups[gk] = &expGroup{les: union, used: now}
	}
}

// dropIdleDeltasLocked forgets the running totals and bounds not used
// since before cutoff: the next delta of their series reads them back
// from storage.
func (s *Store) dropIdleDeltasLocked(cutoff time.Time) {
	for k, rt := range s.deltas {
		if rt.used.Before(cutoff) {
			delete(s.deltas, k)
		}
	}
	for k, g := range s.groups {
		if g.used.Before(cutoff) {
			delete(s.groups, k)
		}
	}
}
