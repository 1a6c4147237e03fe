package llm

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Prices is a price table: for each model, prices per token for input,
// output, cache-read and cache-write tokens, each with the date from which it
// applies (the price in force at a span's start time is used).
//
// A table is one or two layers: the entries of a user file (LoadPrices),
// then the built-in ones. A model name is looked up in the first layer, and
// in the next only when nothing in the first matched; within a layer in this
// order, case-insensitively:
//  1. entries whose "model" equals the name exactly, restricted to the span's
//     provider ("providers" lists it);
//  2. exact entries with no "providers" restriction;
//  3. pattern entries ("pattern", a glob where * matches any run of
//     characters and every other character stands for itself; or "regexp",
//     RE2 syntax, which must match the whole name) restricted to the provider;
//  4. pattern entries with no restriction;
//  5. when the span names no provider, restricted entries too;
//
// and within each step in file order. A Prices is safe for concurrent use;
// its table never changes after loading.
type Prices struct {
	source string
	asOf   string
	layers []*priceLayer // searched in order: the user file's, then the built-in one

	// cache remembers which entry (or none) a (provider, model) pair found,
	// so the pattern scan runs once per distinct pair. Bounded: past
	// maxCached pairs new ones are looked up every time.
	mu    sync.RWMutex
	cache map[cacheKey]*priceEntry
}

type cacheKey struct{ provider, model string }

const maxCached = 10_000

// priceLayer is the entries of one file, indexed for lookup.
type priceLayer struct {
	user     bool          // a user file's, not the built-in table's
	entries  []*priceEntry // file order
	exact    map[string][]*priceEntry
	patterns []*priceEntry
}

type priceEntry struct {
	key       string // identity for overrides: match kind, text and providers
	kind      string // "model", "pattern" or "regexp"
	text      string // the name, glob or regexp as written
	note      string
	glob      []string // lower-case pattern split at '*'; nil for exact and regexp entries
	re        *regexp.Regexp
	providers []string
	periods   []nanoPeriod // ascending by from
}

// nanoPeriod holds prices in nano-USD per million tokens (USD per million
// x 1e9): exact integers for any price quoted to nine decimals.
type nanoPeriod struct {
	from                                 time.Time
	input, output, cacheRead, cacheWrite uint64
}

//go:embed prices.json
var defaultPricesJSON []byte

var (
	defaultOnce   sync.Once
	defaultPrices *Prices
)

// DefaultPrices returns the built-in price table: prices.json in this
// package, generated from @pydantic/genai-prices by scripts/genprices (its
// "source" field names the package version, "as_of" dates the figures). It
// panics only if the embedded file is broken, which its tests rule out.
func DefaultPrices() *Prices {
	defaultOnce.Do(func() {
		p, err := parsePrices(defaultPricesJSON, "built-in prices.json", nil)
		if err != nil {
			panic("llm: built-in price table is invalid (a bug): " + err.Error())
		}
		defaultPrices = p
	})
	return defaultPrices
}

// AsOf returns the date the table's figures were compiled, as written in its
// "as_of" field (the user file's when it has one).
func (p *Prices) AsOf() string { return p.asOf }

// Source says where the table comes from: the built-in table's "source"
// field (the package its figures were generated from, e.g.
// "@pydantic/genai-prices 0.1.8"), followed after a LoadPrices by
// " + " and the user file's path (and its own "source", in parentheses).
func (p *Prices) Source() string { return p.source }

// PriceRow is one entry of a price table.
type PriceRow struct {
	Match     string   // "model" (the exact name), "pattern" (glob) or "regexp" (RE2, whole name)
	Text      string   // the name, glob or regexp as written in the file
	Providers []string // the providers it is restricted to, normalised; empty: any provider
	Note      string   // the entry's "note" (built-in: the genai-prices provider/model)
	User      bool     // from the user file given to LoadPrices, not the built-in table
	Periods   []PricePeriod
}

// PricePeriod is a price in force from a date: USD per million tokens.
// CacheRead and CacheWrite equal Input when the file gives no cache price
// (cached tokens then cost what other input tokens cost); they are never
// left 0 for an absent price.
type PricePeriod struct {
	From                                 time.Time // UTC; 1970-01-01 in the built-in table: in force at any time
	Input, Output, CacheRead, CacheWrite float64
}

// Rows lists the table's entries in lookup precedence: the user file's
// entries (if any), then the built-in ones it did not replace, each in file
// order; periods ascending by From. The result is the caller's to keep.
func (p *Prices) Rows() []PriceRow {
	if p == nil {
		return nil
	}
	var rows []PriceRow
	for _, l := range p.layers {
		for _, e := range l.entries {
			r := PriceRow{Match: e.kind, Text: e.text, Providers: slices.Clone(e.providers), Note: e.note, User: l.user}
			for _, pp := range e.periods {
				r.Periods = append(r.Periods, PricePeriod{
					From:       pp.from,
					Input:      usdPerMillion(pp.input),
					Output:     usdPerMillion(pp.output),
					CacheRead:  usdPerMillion(pp.cacheRead),
					CacheWrite: usdPerMillion(pp.cacheWrite),
				})
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// usdPerMillion converts nano-USD to USD: the float64 nearest the decimal
// price as written (the division is correctly rounded).
func usdPerMillion(nanos uint64) float64 { return float64(nanos) / 1e9 }

// LoadPrices reads a user price file (same JSON shape as the built-in
// prices.json) and returns the built-in table overridden and extended by it:
// the file's entries are searched first, and the built-in table only for a
// model none of them matches; an entry with the same model (or pattern, or
// regexp) and providers as a built-in one replaces it. Errors name the file,
// the entry and the field.
func LoadPrices(path string) (*Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load prices: %w", err)
	}
	return parsePrices(data, path, DefaultPrices())
}

type priceFile struct {
	Source   string            `json:"source"`
	AsOf     string            `json:"as_of"`
	Currency string            `json:"currency"`
	Unit     string            `json:"unit"`
	Notes    []string          `json:"notes"`
	Models   []json.RawMessage `json:"models"`
}

type priceEntryJSON struct {
	Model     string            `json:"model"`
	Pattern   string            `json:"pattern"`
	Regexp    string            `json:"regexp"`
	Providers []string          `json:"providers"`
	Prices    []pricePeriodJSON `json:"prices"`
	Note      string            `json:"note"`
}

type pricePeriodJSON struct {
	From       string       `json:"from"`
	Input      *json.Number `json:"input"`
	Output     *json.Number `json:"output"`
	CacheRead  *json.Number `json:"cache_read"`
	CacheWrite *json.Number `json:"cache_write"`
}

// parsePrices parses a price file. With base non-nil, the result is base
// overridden and extended by the file.
func parsePrices(data []byte, name string, base *Prices) (*Prices, error) {
	var f priceFile
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("prices %s: %w", name, err)
	}
	if f.Currency != "" && f.Currency != "USD" {
		return nil, fmt.Errorf("prices %s: currency %q: only USD is supported", name, f.Currency)
	}
	if f.Unit != "" && f.Unit != "per_million_tokens" {
		return nil, fmt.Errorf("prices %s: unit %q: only per_million_tokens is supported", name, f.Unit)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("prices %s: no entries in \"models\"", name)
	}
	var own []*priceEntry
	seen := map[string]int{}
	for i, raw := range f.Models {
		e, err := parseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("prices %s: models[%d]: %w", name, i, err)
		}
		if j, dup := seen[e.key]; dup {
			return nil, fmt.Errorf("prices %s: models[%d]: same model and providers as models[%d]", name, i, j)
		}
		seen[e.key] = i
		own = append(own, e)
	}
	p := &Prices{source: f.Source, asOf: f.AsOf, layers: []*priceLayer{newLayer(own, base != nil)}}
	if base == nil {
		if p.source == "" {
			p.source = name
		}
		return p, nil
	}
	p.source = base.source + " + " + name
	if f.Source != "" {
		p.source += " (" + f.Source + ")"
	}
	if p.asOf == "" {
		p.asOf = base.asOf
	}
	for _, l := range base.layers {
		var kept []*priceEntry
		for _, e := range l.entries {
			if _, replaced := seen[e.key]; !replaced {
				kept = append(kept, e)
			}
		}
		p.layers = append(p.layers, newLayer(kept, l.user))
	}
	return p, nil
}

func newLayer(entries []*priceEntry, user bool) *priceLayer {
	l := &priceLayer{user: user, entries: entries, exact: map[string][]*priceEntry{}}
	for _, e := range entries {
		if e.kind == "model" {
			m := strings.ToLower(e.text)
			l.exact[m] = append(l.exact[m], e)
		} else {
			l.patterns = append(l.patterns, e)
		}
	}
	return l
}

func parseEntry(raw json.RawMessage) (*priceEntry, error) {
	var j priceEntryJSON
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(&j); err != nil {
		return nil, err
	}
	e := &priceEntry{note: j.Note}
	set := 0
	var key string
	if j.Model != "" {
		set++
		key = "model:" + strings.ToLower(j.Model)
		e.kind, e.text = "model", j.Model
	}
	if j.Pattern != "" {
		set++
		key = "pattern:" + strings.ToLower(j.Pattern)
		e.kind, e.text = "pattern", j.Pattern
		e.glob = strings.Split(strings.ToLower(j.Pattern), "*")
	}
	if j.Regexp != "" {
		set++
		key = "regexp:" + j.Regexp
		e.kind, e.text = "regexp", j.Regexp
		re, err := regexp.Compile(`^(?i:` + j.Regexp + `)$`)
		if err != nil {
			return nil, fmt.Errorf("field \"regexp\": %w", err)
		}
		e.re = re
	}
	if set != 1 {
		return nil, errors.New(`exactly one of the fields "model", "pattern", "regexp" must be set`)
	}
	for i, pr := range j.Providers {
		if strings.TrimSpace(pr) == "" {
			return nil, fmt.Errorf("%s: field \"providers\"[%d] is empty", key, i)
		}
		e.providers = append(e.providers, normalizeProvider(pr))
	}
	sorted := slices.Clone(e.providers)
	slices.Sort(sorted)
	e.key = key + "|" + strings.Join(sorted, ",")
	if len(j.Prices) == 0 {
		return nil, fmt.Errorf("%s: field \"prices\" has no entries", key)
	}
	for i, pj := range j.Prices {
		pp, err := parsePeriod(pj)
		if err != nil {
			return nil, fmt.Errorf("%s: prices[%d]: %w", key, i, err)
		}
		e.periods = append(e.periods, pp)
	}
	slices.SortFunc(e.periods, func(a, b nanoPeriod) int { return a.from.Compare(b.from) })
	for i := 1; i < len(e.periods); i++ {
		if e.periods[i].from.Equal(e.periods[i-1].from) {
			return nil, fmt.Errorf("%s: two prices take effect on %s", key, e.periods[i].from.Format(time.DateOnly))
		}
	}
	return e, nil
}

func parsePeriod(pj pricePeriodJSON) (nanoPeriod, error) {
	var pp nanoPeriod
	if pj.From == "" {
		return pp, errors.New(`field "from" is missing (the date the price takes effect, YYYY-MM-DD)`)
	}
	t, err := time.Parse(time.DateOnly, pj.From)
	if err != nil {
		if t, err = time.Parse(time.RFC3339, pj.From); err != nil {
			return pp, fmt.Errorf("field \"from\" %q: want YYYY-MM-DD or RFC 3339", pj.From)
		}
	}
	pp.from = t
	if pj.Input == nil || pj.Output == nil {
		return pp, errors.New(`fields "input" and "output" are required`)
	}
	fields := []struct {
		name string
		n    *json.Number
		dst  *uint64
	}{
		{"input", pj.Input, &pp.input},
		{"output", pj.Output, &pp.output},
		{"cache_read", pj.CacheRead, &pp.cacheRead},
		{"cache_write", pj.CacheWrite, &pp.cacheWrite},
	}
	for _, f := range fields {
		if f.n == nil {
			continue
		}
		v, err := parseNanos(f.n.String())
		if err != nil {
			return pp, fmt.Errorf("field %q: %w", f.name, err)
		}
		*f.dst = v
	}
	// Without a cache price, cached tokens cost what input tokens cost.
	if pj.CacheRead == nil {
		pp.cacheRead = pp.input
	}
	if pj.CacheWrite == nil {
		pp.cacheWrite = pp.input
	}
	return pp, nil
}

// parseNanos parses a non-negative decimal number of USD (per million
// tokens) into nano-USD, exactly, refusing more than nine decimals.
func parseNanos(s string) (uint64, error) {
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a non-negative decimal number", s)
	}
	if strings.ContainsAny(s, "eE") {
		return 0, fmt.Errorf("%q: write the price without an exponent", s)
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 {
		return 0, fmt.Errorf("%q has more than 9 decimals", s)
	}
	frac += strings.Repeat("0", 9-len(frac))
	var v uint64
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a non-negative decimal number", s)
		}
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 || lo > 1<<62 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		v = lo
	}
	return v, nil
}

// Cost prices one call in nano-USD: cache-read and cache-write tokens at
// their own prices (and not again at the input price), the rest of the input
// at the input price, all output (reasoning included) at the output price.
// in must include cacheRead and cacheWrite (the model.LLM convention). ok is
// false when no entry matches the model or no price is in force at at.
func (p *Prices) Cost(provider, model string, at time.Time, in, out, cacheRead, cacheWrite int64) (nanoUSD int64, ok bool) {
	if p == nil || model == "" {
		return 0, false
	}
	pp, ok := p.lookup(normalizeProvider(provider), strings.ToLower(model), at)
	if !ok {
		return 0, false
	}
	in, out, cacheRead, cacheWrite = max(in, 0), max(out, 0), max(cacheRead, 0), max(cacheWrite, 0)
	uncached := max(in-cacheRead-cacheWrite, 0)
	var hi, lo uint64
	for _, t := range [...][2]uint64{
		{uint64(uncached), pp.input},
		{uint64(cacheRead), pp.cacheRead},
		{uint64(cacheWrite), pp.cacheWrite},
		{uint64(out), pp.output},
	} {
		h, l := bits.Mul64(t[0], t[1])
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	// Divide by a million tokens, rounding half up.
	lo, c := bits.Add64(lo, 500_000, 0)
	hi += c
	if hi >= 1_000_000 {
		return 0, false // overflow: more than 2^64 nano-USD
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > 1<<63-1 {
		return 0, false
	}
	return int64(q), true
}

func (p *Prices) lookup(provider, model string, at time.Time) (nanoPeriod, bool) {
	k := cacheKey{provider, model}
	p.mu.RLock()
	e, cached := p.cache[k]
	p.mu.RUnlock()
	if !cached {
		e = p.find(provider, model)
		p.mu.Lock()
		if p.cache == nil {
			p.cache = map[cacheKey]*priceEntry{}
		}
		if len(p.cache) < maxCached {
			p.cache[k] = e
		}
		p.mu.Unlock()
	}
	if e == nil {
		return nanoPeriod{}, false
	}
	i, _ := slices.BinarySearchFunc(e.periods, at, func(pp nanoPeriod, t time.Time) int {
		if pp.from.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return nanoPeriod{}, false // before the first price took effect
	}
	return e.periods[i-1], true
}

// find returns the entry of the first layer that has one for the pair.
func (p *Prices) find(provider, model string) *priceEntry {
	for _, l := range p.layers {
		if e := l.find(provider, model); e != nil {
			return e
		}
	}
	return nil
}

func (l *priceLayer) find(provider, model string) *priceEntry {
	exact := l.exact[model]
	for _, e := range exact {
		if provider != "" && slices.Contains(e.providers, provider) {
			return e
		}
	}
	for _, e := range exact {
		if len(e.providers) == 0 {
			return e
		}
	}
	var generic, anyProvider *priceEntry
	for _, e := range l.patterns {
		// Decide whether the entry could change the answer before running
		// its (maybe regexp) match: most entries are other providers'.
		restricted := len(e.providers) > 0
		mine := restricted && provider != "" && slices.Contains(e.providers, provider)
		switch {
		case !restricted && generic != nil:
			continue
		case restricted && !mine && (provider != "" || anyProvider != nil):
			continue
		}
		if !e.matches(model) {
			continue
		}
		switch {
		case !restricted:
			generic = e
		case mine:
			return e
		default:
			anyProvider = e
		}
	}
	if generic != nil {
		return generic
	}
	if provider == "" {
		if len(exact) > 0 {
			return exact[0]
		}
		return anyProvider
	}
	return nil
}

func (e *priceEntry) matches(model string) bool {
	if e.re != nil {
		return e.re.MatchString(model)
	}
	return globMatch(e.glob, model)
}

// globMatch reports whether name matches the pattern split at its '*'s,
// where * matches any run of characters (including none) and every other
// character matches itself.
func globMatch(parts []string, name string) bool {
	if len(parts) == 1 {
		return parts[0] == name
	}
	if len(name) < len(parts[0])+len(parts[len(parts)-1]) {
		return false
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return strings.HasSuffix(name, last)
}
