package store

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rastro-dev/rastro/internal/model"
)

// MetricBackend stores OpenTelemetry metrics as Prometheus-style series
// (internal/metricstore) and reads them back for the /prom query API. A
// storage backend without metrics has none: those routes answer 501.
type MetricBackend interface {
	// AppendMetrics decodes one export request (an *otlp.Error when it is
	// malformed, nothing stored) and returns once its points are durable
	// per the durability mode and readable.
	AppendMetrics(project string, format MetricFormat, body []byte) (MetricResult, error)
	// SelectSeries returns the project's series matching every matcher with
	// their samples in [mint, maxt] (milliseconds), sorted by labels; a
	// series without samples there is left out.
	SelectSeries(project string, mint, maxt int64, ms []*LabelMatcher) ([]SeriesData, error)
	// SeriesLabels returns the label sets of the project's series matching
	// every matcher that have samples overlapping [mint, maxt], sorted.
	SeriesLabels(project string, mint, maxt int64, ms []*LabelMatcher) ([]Labels, error)
	// Exemplars returns the exemplars of the matching series in [mint, maxt].
	Exemplars(project string, mint, maxt int64, ms []*LabelMatcher) ([]SeriesExemplars, error)
}

// MetricFormat is the encoding of a metrics export request.
type MetricFormat int

const (
	MetricFormatProto MetricFormat = iota // ExportMetricsServiceRequest, protobuf
	MetricFormatJSON                      // the same in OTLP/JSON
)

// MetricResult is what AppendMetrics stored, counted in data points.
type MetricResult struct {
	Accepted int
	// Rejected counts points not stored (delta temporality, samples older
	// than their series' newest) and exemplars with malformed ids;
	// RejectMsg names the first.
	Rejected  int
	RejectMsg string
	Problems  model.Problems
}

// Label is one name=value pair of a series.
type Label struct{ Name, Value string }

// Labels is a series' label set, sorted by name, names unique.
type Labels []Label

// MetricName is the label holding a series' metric name.
const MetricName = "__name__"

// Get returns the value of name, or "".
func (ls Labels) Get(name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// Key is a string that identifies the label set.
func (ls Labels) Key() string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Name)
		b.WriteByte(0xff)
		b.WriteString(l.Value)
		b.WriteByte(0xfe)
	}
	return b.String()
}

// String renders the set as {a="b", ...}.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// CompareLabels orders label sets as Prometheus does: pair by pair.
func CompareLabels(a, b Labels) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// SortLabels sorts ls by name in place and returns it.
func SortLabels(ls Labels) Labels {
	slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// MatchType is the operator of a label matcher.
type MatchType int

const (
	MatchEqual     MatchType = iota // =
	MatchNotEqual                   // !=
	MatchRegexp                     // =~
	MatchNotRegexp                  // !~
)

func (t MatchType) String() string { return [...]string{"=", "!=", "=~", "!~"}[t] }

// LabelMatcher selects series by one label; a missing label has the value "".
type LabelMatcher struct {
	Type        MatchType
	Name, Value string
	re          *regexp.Regexp
}

// NewLabelMatcher compiles a matcher; a regular expression is anchored at
// both ends, as Prometheus anchors it.
func NewLabelMatcher(t MatchType, name, value string) (*LabelMatcher, error) {
	m := &LabelMatcher{Type: t, Name: name, Value: value}
	if t == MatchRegexp || t == MatchNotRegexp {
		re, err := regexp.Compile("^(?s:" + value + ")$")
		if err != nil {
			return nil, fmt.Errorf("%w: label matcher %s%s%q: %v", ErrBadRequest, name, t, value, err)
		}
		m.re = re
	}
	return m, nil
}

// Matches reports whether v satisfies the matcher.
func (m *LabelMatcher) Matches(v string) bool {
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.re.MatchString(v)
	}
	return !m.re.MatchString(v)
}

// MatchLabels reports whether ls satisfies every matcher.
func MatchLabels(ls Labels, ms []*LabelMatcher) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// Sample is one point of a series: a time in milliseconds and a value.
type Sample struct {
	T int64
	V float64
}

// SeriesData is a series with its samples in time order.
type SeriesData struct {
	Labels  Labels
	Samples []Sample
}

// MetricExemplar is an exemplar kept with a series: the value measured at a
// time (milliseconds) within a trace and span.
type MetricExemplar struct {
	T       int64
	V       float64
	TraceID model.TraceID
	SpanID  model.SpanID
}

// SeriesExemplars is a series with its exemplars in time order.
type SeriesExemplars struct {
	Labels    Labels
	Exemplars []MetricExemplar
}
