package bench

import (
	"strconv"
	"strings"
)

// Metric is one sample of the Prometheus text format.
type Metric struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a scraped /metrics page.
type Metrics []Metric

// ParseMetrics reads the Prometheus text exposition format, skipping
// comments and lines it cannot read.
func ParseMetrics(text string) Metrics {
	var out Metrics
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var m Metric
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			m.Name = line[:i]
			m.Labels = parseLabels(line[i+1 : j])
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			m.Name, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m.Value = v
		out = append(out, m)
	}
	return out
}

func parseLabels(s string) map[string]string {
	l := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return l
		}
		k := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var b strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		l[k] = b.String()
		if i >= len(s) {
			return l
		}
		s = strings.TrimLeft(s[i+1:], ", ")
	}
	return l
}

// Sum adds the values of every series called name whose labels include all
// of labels (given as key, value pairs). ok is false when none matched.
func (ms Metrics) Sum(name string, labels ...string) (sum float64, ok bool) {
next:
	for _, m := range ms {
		if m.Name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if m.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += m.Value
		ok = true
	}
	return sum, ok
}
