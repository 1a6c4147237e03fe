package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// byteSize is a flag value for sizes: plain bytes or a number with a unit
// (KiB, MiB, GiB, KB, MB, GB).
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"b", 1},
}

func (b *byteSize) String() string {
	v := int64(*b)
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.m && v%u.m == 0 {
			return strconv.FormatInt(v/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("invalid size %q: use bytes or a number with KiB, MiB or GiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// days is a duration flag that also accepts days ("7d", "1.5d") besides
// time.ParseDuration's forms ("36h"); "0" means none.
type days time.Duration

func (d *days) String() string {
	v := time.Duration(*d)
	if v != 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *days) Set(s string) error {
	v, err := parseDays(s)
	if err != nil {
		return err
	}
	*d = days(v)
	return nil
}

func parseDays(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(t, "d"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("invalid duration %q: use e.g. 7d, 36h or 90m", s)
		}
		return time.Duration(f * float64(24*time.Hour)), nil
	}
	v, err := time.ParseDuration(t)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid duration %q: use e.g. 7d, 36h or 90m", s)
	}
	return v, nil
}

// projectDays is a flag holding per-project durations: "a=7d,b=36h".
type projectDays struct{ m map[string]time.Duration }

func (p *projectDays) String() string {
	if p == nil || len(p.m) == 0 {
		return ""
	}
	names := make([]string, 0, len(p.m))
	for n := range p.m {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		d := days(p.m[n])
		parts[i] = n + "=" + d.String()
	}
	return strings.Join(parts, ",")
}

func (p *projectDays) Set(s string) error {
	m := map[string]time.Duration{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("invalid entry %q: want PROJECT=DURATION, e.g. staging=1d", part)
		}
		d, err := parseDays(val)
		if err != nil {
			return fmt.Errorf("project %q: %v", name, err)
		}
		m[strings.TrimSpace(name)] = d
	}
	p.m = m
	return nil
}
