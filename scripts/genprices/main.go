// Command genprices writes internal/llm/prices.json, Rastro's built-in LLM
// price table, from the data of the npm package @pydantic/genai-prices
// (MIT), pinned in package.json / package-lock.json beside this file.
//
//	npm ci --prefix scripts/genprices
//	go run ./scripts/genprices [-pkg DIR] [-o FILE]
//
// gen.sh does both and writes the table in place; check.sh writes it to a
// temporary file and fails if it differs from the committed one.
//
// The package keeps its data in its JavaScript bundle (dist/index.js), not
// in a JSON file: a list of providers, each with models in match order, each
// model with a match rule and prices. The mapping to Rastro's format:
//
//   - Match rules: equals -> "model"; starts_with / ends_with / contains ->
//     a glob "pattern"; regex -> an RE2 "regexp" that matches the whole name
//     (`.*` added where genai-prices' search was unanchored); or -> one entry
//     per alternative; and -> only when all but one condition are
//     negative lookaheads (`^(?!...)`, which RE2 cannot express): the
//     lookahead is dropped and the entry reported as approximated.
//   - Order: genai-prices takes a provider's first model whose rule matches,
//     whereas Rastro tries exact names before patterns. An exact name that an
//     earlier model of the same provider already matches is therefore left
//     out (genai-prices never reaches it), and patterns keep their order.
//   - Providers: each entry is restricted to the provider's names as Rastro
//     normalises them (providerNames). A provider's fallback providers
//     (azure -> openai, ...; google -> anthropic) are copied after its own
//     models, restricted to it.
//   - Prices: input_mtok, output_mtok, cache_read_mtok, cache_write_mtok
//     (USD per million tokens); a tiered price (by context size) at its base
//     tier; other price keys (per request, per search, audio, images) are
//     ignored and counted. A model with no per-token price at all is skipped.
//     Undated prices apply from 1970-01-01 (genai-prices applies them at any
//     time); start_date constraints become "from" periods; where a price
//     depends on the time of day, the price in force for most of the day.
//
// The output is deterministic: the same package gives the same bytes.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

const (
	pkgName    = "@pydantic/genai-prices"
	pkgVersion = "0.1.8"
	// pkgPublished dates the data: the package's data carries no date of its
	// own, so this is the npm publish time of pkgVersion
	// (`npm view @pydantic/genai-prices@0.1.8 time`: 2026-09-23T10:11:04Z).
	pkgPublished = "2026-09-23"
	// alwaysFrom starts prices that genai-prices applies at any time.
	alwaysFrom = "1970-01-01"
)

// providerNames maps genai-prices provider ids to the provider names Rastro's
// spans carry after normalisation (internal/llm normalizeProvider: the OTel
// gen_ai.provider.name well-known values). Ids not listed keep their own
// name, which is what a span naming that provider carries.
var providerNames = map[string][]string{
	"anthropic":  {"anthropic"},
	"aws":        {"aws.bedrock"},
	"azure":      {"azure.ai.openai", "azure.ai.inference"},
	"cohere":     {"cohere"},
	"deepseek":   {"deepseek"},
	"google":     {"gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai"},
	"groq":       {"groq"},
	"mistral":    {"mistral_ai"},
	"openai":     {"openai"},
	"perplexity": {"perplexity"},
	"together":   {"together", "together_ai"},
	"x-ai":       {"x_ai"},
}

func main() {
	pkgDir := flag.String("pkg", "scripts/genprices/node_modules/@pydantic/genai-prices", "the installed npm package")
	out := flag.String("o", "internal/llm/prices.json", "output file (- for standard output)")
	dumpJSON := flag.String("dump-json", "", "also write the package's provider data, as parsed, to this JSON file")
	flag.Parse()
	if err := run(*pkgDir, *out, *dumpJSON, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "genprices:", err)
		os.Exit(1)
	}
}

func run(pkgDir, out, dumpJSON string, log io.Writer) error {
	var meta struct{ Name, Version string }
	raw, err := os.ReadFile(pkgDir + "/package.json")
	if err != nil {
		return fmt.Errorf("%w (install the pinned package first: npm ci --prefix scripts/genprices)", err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("%s/package.json: %w", pkgDir, err)
	}
	if meta.Name != pkgName || meta.Version != pkgVersion {
		return fmt.Errorf("%s holds %s %s, want %s %s (run npm ci in scripts/genprices)", pkgDir, meta.Name, meta.Version, pkgName, pkgVersion)
	}
	bundle, err := os.ReadFile(pkgDir + "/dist/index.js")
	if err != nil {
		return err
	}
	data, err := extractProviders(string(bundle))
	if err != nil {
		return fmt.Errorf("%s/dist/index.js: %w", pkgDir, err)
	}
	if dumpJSON != "" {
		js, err := json.MarshalIndent(data, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(dumpJSON, append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	g := &generator{stats: newStats()}
	if err := g.load(data); err != nil {
		return err
	}
	g.build()
	var buf bytes.Buffer
	if err := g.write(&buf); err != nil {
		return err
	}
	if out == "-" {
		_, err = os.Stdout.Write(buf.Bytes())
	} else {
		err = os.WriteFile(out, buf.Bytes(), 0o644)
	}
	if err != nil {
		return err
	}
	g.stats.print(log, out)
	return nil
}

// ---- the package's data ----

type gProvider struct {
	id        string
	names     []string
	models    []*gModel
	fallback  []string
	byModelID bool // has model_match: genai-prices finds it from a model name alone
}

type gModel struct {
	provider string
	id       string
	match    any

	rules   []rule   // Rastro match entries, in order
	notes   []string // approximations made in rules
	periods []period
	skip    string // why the model is not written
}

type rule struct{ kind, text string } // kind: model, pattern or regexp

type period struct {
	from                                 string
	input, output, cacheRead, cacheWrite string // decimal USD per million tokens; cache "" = absent
}

type generator struct {
	providers []*gProvider
	byID      map[string]*gProvider
	entries   []entry
	stats     *stats
}

type entry struct {
	rule
	providers []string
	periods   []period
	note      string
}

func (g *generator) load(data []any) error {
	g.byID = map[string]*gProvider{}
	for i, pv := range data {
		pm, ok := pv.(map[string]any)
		if !ok {
			return fmt.Errorf("provider %d is not an object", i)
		}
		id, _ := pm["id"].(string)
		models, ok := pm["models"].([]any)
		if id == "" || !ok {
			return fmt.Errorf("provider %d: no id or models", i)
		}
		p := &gProvider{id: id, names: providerNames[id]}
		if p.names == nil {
			p.names = []string{strings.ToLower(id)}
		}
		_, p.byModelID = pm["model_match"]
		if fb, ok := pm["fallback_model_providers"].([]any); ok {
			for _, f := range fb {
				s, _ := f.(string)
				p.fallback = append(p.fallback, s)
			}
		}
		for j, mv := range models {
			mm, ok := mv.(map[string]any)
			if !ok {
				return fmt.Errorf("provider %s model %d is not an object", id, j)
			}
			m := &gModel{provider: id, match: mm["match"]}
			m.id, _ = mm["id"].(string)
			if m.id == "" || m.match == nil || mm["prices"] == nil {
				return fmt.Errorf("provider %s model %d: no id, match or prices", id, j)
			}
			g.stats.models++
			var err error
			m.rules, m.notes, err = convertMatch(m.match)
			if err != nil {
				m.skip = "match rule: " + err.Error()
			} else if m.periods, err = g.convertPrices(m, mm["prices"]); err != nil {
				m.skip = err.Error()
			}
			p.models = append(p.models, m)
		}
		g.providers = append(g.providers, p)
		g.byID[id] = p
	}
	g.stats.providers = len(g.providers)
	return nil
}

// ---- match rules ----

// convertMatch turns a genai-prices match rule into Rastro entries.
func convertMatch(m any) (rules []rule, notes []string, err error) {
	obj, ok := m.(map[string]any)
	if !ok || len(obj) != 1 {
		return nil, nil, fmt.Errorf("not a one-key object: %s", show(m))
	}
	for op, arg := range obj {
		switch op {
		case "equals", "starts_with", "ends_with", "contains", "regex":
			s, ok := arg.(string)
			if !ok {
				return nil, nil, fmt.Errorf("%s: not a string", op)
			}
			r, err := leafRule(op, s)
			if err != nil {
				return nil, nil, err
			}
			return []rule{r}, nil, nil
		case "or":
			alts, ok := arg.([]any)
			if !ok || len(alts) == 0 {
				return nil, nil, errors.New("or: not a list")
			}
			var failed []string
			for _, a := range alts {
				rs, ns, err := convertMatch(a)
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s (%v)", show(a), err))
					continue
				}
				rules = append(rules, rs...)
				notes = append(notes, ns...)
			}
			if len(rules) == 0 {
				return nil, nil, fmt.Errorf("no alternative expressible: %s", strings.Join(failed, "; "))
			}
			for _, f := range failed {
				notes = append(notes, "dropped alternative "+f)
			}
			return rules, notes, nil
		case "and":
			conds, ok := arg.([]any)
			if !ok || len(conds) == 0 {
				return nil, nil, errors.New("and: not a list")
			}
			var rest []any
			for _, c := range conds {
				if re, ok := c.(map[string]any)["regex"].(string); ok {
					if _, neg := negativeLookahead(re); neg {
						notes = append(notes, fmt.Sprintf("ignored the exclusion /%s/ (RE2 has no lookahead)", re))
						continue
					}
				}
				rest = append(rest, c)
			}
			if len(rest) != 1 {
				return nil, nil, fmt.Errorf("and of %d conditions: %s", len(rest), show(m))
			}
			rs, ns, err := convertMatch(rest[0])
			if err != nil {
				return nil, nil, err
			}
			return rs, append(notes, ns...), nil
		default:
			return nil, nil, fmt.Errorf("unknown operator %q", op)
		}
	}
	panic("unreachable")
}

func leafRule(op, s string) (rule, error) {
	if s == "" {
		return rule{}, fmt.Errorf("%s: empty string", op)
	}
	star := strings.Contains(s, "*") // a glob cannot say a literal '*'
	q := regexp.QuoteMeta(s)
	switch op {
	case "equals":
		return rule{"model", s}, nil
	case "starts_with":
		if star {
			return rule{"regexp", q + ".*"}, nil
		}
		return rule{"pattern", s + "*"}, nil
	case "ends_with":
		if star {
			return rule{"regexp", ".*" + q}, nil
		}
		return rule{"pattern", "*" + s}, nil
	case "contains":
		if star {
			return rule{"regexp", ".*" + q + ".*"}, nil
		}
		return rule{"pattern", "*" + s + "*"}, nil
	}
	// regex: genai-prices searches the lower-cased name with it (JavaScript
	// RegExp.test: unanchored, case-sensitive); Rastro's regexp must match
	// the whole name, case-insensitively.
	if _, neg := negativeLookahead(s); neg {
		return rule{}, fmt.Errorf("regex /%s/ is a lookahead, which RE2 cannot express", s)
	}
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return rule{}, fmt.Errorf("regex /%s/ is not RE2: %v", s, err)
	}
	if hasUpper(re) {
		return rule{}, fmt.Errorf("regex /%s/ has upper-case letters: genai-prices tests it on the lower-cased name", s)
	}
	core, head, tail := s, ".*", ".*"
	if re.Op == syntax.OpConcat && len(re.Sub) > 0 {
		if re.Sub[0].Op == syntax.OpBeginText && strings.HasPrefix(core, "^") {
			core, head = core[1:], ""
		}
		if re.Sub[len(re.Sub)-1].Op == syntax.OpEndText && strings.HasSuffix(core, "$") && !strings.HasSuffix(core, `\$`) {
			core, tail = core[:len(core)-1], ""
		}
	}
	if head != "" || tail != "" {
		if head == "" || tail == "" {
			// One anchor stripped: the rest is a concatenation, safe to extend.
			return rule{"regexp", head + core + tail}, nil
		}
		core = "(?:" + core + ")"
	}
	return rule{"regexp", head + core + tail}, nil
}

// hasUpper reports whether re can only match through an upper-case letter
// somewhere: such a branch never matches in genai-prices (the name is lower
// case there) but would in Rastro (case-insensitive).
func hasUpper(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			for _, r := range re.Rune {
				if unicode.IsUpper(r) {
					return true
				}
			}
		}
	case syntax.OpCharClass:
		in := func(c rune) bool {
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i] <= c && c <= re.Rune[i+1] {
					return true
				}
			}
			return false
		}
		for c := 'A'; c <= 'Z'; c++ {
			if in(c) && !in(unicode.ToLower(c)) {
				return true
			}
		}
	}
	for _, sub := range re.Sub {
		if hasUpper(sub) {
			return true
		}
	}
	return false
}

// negativeLookahead recognises `^(?!X)` and returns X.
func negativeLookahead(re string) (string, bool) {
	if !strings.HasPrefix(re, "^(?!") || !strings.HasSuffix(re, ")") {
		return "", false
	}
	inner := re[len("^(?!") : len(re)-1]
	if _, err := syntax.Parse(inner, syntax.Perl); err != nil {
		return "", false // not balanced, or not RE2
	}
	return inner, true
}

// ---- evaluating genai-prices rules (for shadowing) ----

var jsRegexCache = map[string]func(string) bool{}

// matches evaluates a genai-prices rule the way genai-prices does, on a
// lower-cased model name. Rules it cannot evaluate do not match.
func matches(m any, name string) bool {
	obj, _ := m.(map[string]any)
	for op, arg := range obj {
		switch op {
		case "or":
			alts, _ := arg.([]any)
			return slices.ContainsFunc(alts, func(a any) bool { return matches(a, name) })
		case "and":
			conds, _ := arg.([]any)
			return len(conds) > 0 && !slices.ContainsFunc(conds, func(c any) bool { return !matches(c, name) })
		}
		s, _ := arg.(string)
		switch op {
		case "equals":
			return name == strings.ToLower(s)
		case "starts_with":
			return strings.HasPrefix(name, strings.ToLower(s))
		case "ends_with":
			return strings.HasSuffix(name, strings.ToLower(s))
		case "contains":
			return strings.Contains(name, strings.ToLower(s))
		case "regex":
			f, ok := jsRegexCache[s]
			if !ok {
				f = func(string) bool { return false }
				if inner, neg := negativeLookahead(s); neg {
					if re, err := regexp.Compile(`^(?:` + inner + `)`); err == nil {
						f = func(n string) bool { return !re.MatchString(n) }
					}
				} else if re, err := regexp.Compile(s); err == nil {
					f = re.MatchString
				}
				jsRegexCache[s] = f
			}
			return f(name)
		}
	}
	return false
}

// ---- prices ----

var tokenKeys = map[string]bool{"input_mtok": true, "output_mtok": true, "cache_read_mtok": true, "cache_write_mtok": true}

// convertPrices turns a model's prices (one price object, or a list of
// conditional ones) into dated periods.
func (g *generator) convertPrices(m *gModel, v any) ([]period, error) {
	list, isList := v.([]any)
	if !isList {
		p, err := g.tokenPrices(m, v)
		if err != nil {
			return nil, err
		}
		p.from = alwaysFrom
		return []period{p}, nil
	}
	type cond struct {
		prices            any
		kind              string // "", start_date, time_of_date
		start             time.Time
		winFrom, winUntil int // seconds of the day, UTC
	}
	var conds []cond
	days := []string{alwaysFrom}
	for i, item := range list {
		im, ok := item.(map[string]any)
		if !ok || im["prices"] == nil {
			return nil, fmt.Errorf("prices[%d]: not a conditional price", i)
		}
		c := cond{prices: im["prices"]}
		if cv, ok := im["constraint"]; ok {
			cm, _ := cv.(map[string]any)
			switch {
			case cm["start_date"] != nil:
				s, _ := cm["start_date"].(string)
				t, err := time.Parse(time.DateOnly, s)
				if err != nil {
					return nil, fmt.Errorf("prices[%d]: start_date %q", i, s)
				}
				c.kind, c.start = "start_date", t
				days = append(days, s)
			case cm["start_time"] != nil:
				a, _ := cm["start_time"].(string)
				b, _ := cm["end_time"].(string)
				var err1, err2 error
				c.winFrom, err1 = timeOfDay(a)
				c.winUntil, err2 = timeOfDay(b)
				if err1 != nil || err2 != nil {
					return nil, fmt.Errorf("prices[%d]: time of day %q-%q", i, a, b)
				}
				c.kind = "time_of_date"
			default:
				return nil, fmt.Errorf("prices[%d]: unknown constraint %s", i, show(cv))
			}
		}
		conds = append(conds, c)
	}
	// genai-prices' choice at time t: the last entry whose constraint holds
	// (none holds: the first). With tod false no time-of-day window holds:
	// genai-prices' price outside all windows.
	choose := func(t time.Time, tod bool) int {
		sec := t.Hour()*3600 + t.Minute()*60 + t.Second()
		for i := len(conds) - 1; i >= 0; i-- {
			c := conds[i]
			switch c.kind {
			case "":
				return i
			case "start_date":
				if !t.Before(c.start) {
					return i
				}
			case "time_of_date":
				if !tod {
					continue
				}
				if c.winUntil < c.winFrom {
					if sec >= c.winFrom || sec < c.winUntil {
						return i
					}
				} else if sec >= c.winFrom && sec < c.winUntil {
					return i
				}
			}
		}
		return 0
	}
	// Cut each day at every time-of-day boundary; the choice is constant
	// between cuts and between start dates.
	cuts := []int{0, 86400}
	for _, c := range conds {
		if c.kind == "time_of_date" {
			cuts = append(cuts, c.winFrom, c.winUntil)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	slices.Sort(days)
	days = slices.Compact(days)
	timeOfDay := len(cuts) > 2
	var periods []period
	for _, d := range days {
		day, _ := time.Parse(time.DateOnly, d)
		share := make([]int, len(conds))
		for k := 0; k+1 < len(cuts); k++ {
			share[choose(day.Add(time.Duration(cuts[k])*time.Second), true)] += cuts[k+1] - cuts[k]
		}
		best := 0
		for i, s := range share {
			if s > share[best] {
				best = i
			}
		}
		if timeOfDay && best != choose(day, false) && !slices.Contains(g.stats.timeOfDayNotDefault, m.provider+"/"+m.id) {
			g.stats.timeOfDayNotDefault = append(g.stats.timeOfDayNotDefault, m.provider+"/"+m.id)
		}
		p, err := g.tokenPrices(m, conds[best].prices)
		if err != nil {
			if d == alwaysFrom {
				return nil, err
			}
			return nil, fmt.Errorf("price from %s: %w", d, err)
		}
		p.from = d
		if n := len(periods); n > 0 && samePrices(periods[n-1], p) {
			continue
		}
		periods = append(periods, p)
	}
	if timeOfDay {
		g.stats.timeOfDay = append(g.stats.timeOfDay, m.provider+"/"+m.id)
	}
	return periods, nil
}

func samePrices(a, b period) bool {
	a.from, b.from = "", ""
	return a == b
}

// tokenPrices reads the per-token prices out of one genai-prices price
// object.
func (g *generator) tokenPrices(m *gModel, v any) (period, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return period{}, fmt.Errorf("price is not an object: %s", show(v))
	}
	var p period
	var other []string
	for k, val := range obj {
		if !tokenKeys[k] {
			other = append(other, k)
			continue
		}
		s, err := g.decimal(m, k, val)
		if err != nil {
			return period{}, err
		}
		switch k {
		case "input_mtok":
			p.input = s
		case "output_mtok":
			p.output = s
		case "cache_read_mtok":
			p.cacheRead = s
		case "cache_write_mtok":
			p.cacheWrite = s
		}
	}
	sort.Strings(other)
	if p.input == "" && p.output == "" && len(other) > 0 {
		return period{}, fmt.Errorf("no per-token price (priced by %s)", strings.Join(other, ", "))
	}
	for _, k := range other {
		if g.stats.ignoredKeys[k] == nil {
			g.stats.ignoredKeys[k] = map[string]bool{}
		}
		g.stats.ignoredKeys[k][m.provider+"/"+m.id] = true
	}
	if p.input == "" {
		p.input = "0"
	}
	if p.output == "" {
		p.output = "0"
	}
	return p, nil
}

// decimal formats a price (a number, or a tiered price at its base) as a
// decimal with at most 9 places: exactly, or rounded (half away from zero)
// where the package wrote float noise (0.18000000000000002, 1/12 as
// 0.08333333333333334); those are counted.
func (g *generator) decimal(m *gModel, key string, v any) (string, error) {
	if t, ok := v.(map[string]any); ok {
		base, ok := t["base"]
		if !ok {
			return "", fmt.Errorf("%s: tiered price without base", key)
		}
		g.stats.tiered[m.provider+"/"+m.id] = true
		v = base
	}
	n, ok := v.(jsNumber)
	if !ok {
		return "", fmt.Errorf("%s: not a number: %s", key, show(v))
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || r.Sign() < 0 {
		return "", fmt.Errorf("%s: bad price %q", key, n)
	}
	if !new(big.Rat).Mul(r, big.NewRat(1_000_000_000, 1)).IsInt() {
		g.stats.rounded[m.provider+"/"+m.id+" "+key+" "+string(n)] = true
	}
	s := r.FloatString(9) // rounds half away from zero
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, "."), nil
}

// timeOfDay parses genai-prices' time of day ("00:30:00Z", "08:00:00+08:00")
// into seconds after midnight UTC.
func timeOfDay(s string) (int, error) {
	m := regexp.MustCompile(`^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$`).FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("bad time of day %q", s)
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	se, _ := strconv.Atoi(m[3])
	off := 0
	if m[4] != "Z" {
		oh, _ := strconv.Atoi(m[6])
		om, _ := strconv.Atoi(m[7])
		off = oh*3600 + om*60
		if m[5] == "-" {
			off = -off
		}
	}
	if h > 23 || mi > 59 || se > 59 {
		return 0, fmt.Errorf("bad time of day %q", s)
	}
	return ((h*3600+mi*60+se-off)%86400 + 86400) % 86400, nil
}

// ---- the table ----

// build lays out the entries: providers that genai-prices can find from a
// model name alone first (they win for spans that name no provider), then
// the rest, each in the package's order; after each provider's own models,
// copies of its fallback providers' models.
func (g *generator) build() {
	order := slices.Clone(g.providers)
	slices.SortStableFunc(order, func(a, b *gProvider) int {
		switch {
		case a.byModelID == b.byModelID:
			return 0
		case a.byModelID:
			return -1
		}
		return 1
	})
	for _, p := range g.providers {
		for _, m := range p.models {
			if m.skip != "" {
				g.stats.skip(m.skip, p.id+"/"+m.id)
			}
			for _, n := range m.notes {
				g.stats.approx = append(g.stats.approx, p.id+"/"+m.id+": "+n)
			}
		}
	}
	for _, p := range order {
		chain := []*gProvider{p}
		for _, f := range p.fallback {
			if fp := g.byID[f]; fp != nil {
				chain = append(chain, fp)
			}
		}
		var models []*gModel
		for _, cp := range chain {
			models = append(models, cp.models...)
		}
		emitted := map[string]bool{}
		for j, m := range models {
			if m.skip != "" {
				continue
			}
			note := m.provider + "/" + m.id
			if m.provider != p.id {
				note += " (" + p.id + " falls back to " + m.provider + ")"
			}
			wrote := false
			for _, r := range m.rules {
				key := r.kind + ":" + r.text
				if r.kind != "regexp" {
					key = r.kind + ":" + strings.ToLower(r.text)
				}
				if emitted[key] {
					g.stats.duplicate++
					continue
				}
				if r.kind == "model" {
					name := strings.ToLower(r.text)
					if slices.ContainsFunc(models[:j], func(e *gModel) bool { return matches(e.match, name) }) {
						g.stats.shadowed++
						continue
					}
				}
				emitted[key] = true
				g.entries = append(g.entries, entry{rule: r, providers: p.names, periods: m.periods, note: note})
				g.stats.kinds[r.kind]++
				if m.provider != p.id {
					g.stats.fallbackEntries++
				}
				wrote = true
			}
			if wrote && m.provider == p.id {
				g.stats.written++
			}
		}
	}
}

func (g *generator) write(w io.Writer) error {
	str := func(s string) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			panic(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	strs := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = str(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	notes := []string{
		fmt.Sprintf("Generated by scripts/genprices from the npm package %s %s (MIT, https://github.com/pydantic/genai-prices): do not edit, run scripts/genprices/gen.sh. as_of is the package's publish date; its data carries no date of its own.", pkgName, pkgVersion),
		"Prices in USD per million tokens: genai-prices' input_mtok, output_mtok, cache_read_mtok, cache_write_mtok. A tiered (long-context) price is given at its base tier; per-request, per-search, audio and image prices are left out. A missing cache price means the input price.",
		"from: the date (UTC) a price takes effect. 1970-01-01 marks a price genai-prices applies at any time. Where genai-prices prices by time of day, the price in force for most of the day is given.",
		"Entries are restricted to the span's provider (genai-prices groups models by provider); note names the genai-prices provider/model.",
	}
	var b strings.Builder
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"source\": %s,\n", str(pkgName+" "+pkgVersion))
	fmt.Fprintf(&b, "  \"as_of\": %s,\n", str(pkgPublished))
	b.WriteString("  \"currency\": \"USD\",\n  \"unit\": \"per_million_tokens\",\n  \"notes\": [\n")
	for i, n := range notes {
		sep := ","
		if i == len(notes)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s%s\n", str(n), sep)
	}
	b.WriteString("  ],\n  \"models\": [\n")
	for i, e := range g.entries {
		fmt.Fprintf(&b, "    {%s: %s, \"providers\": %s, \"prices\": [", str(e.kind), str(e.text), strs(e.providers))
		for k, p := range e.periods {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{\"from\": %s, \"input\": %s, \"output\": %s", str(p.from), p.input, p.output)
			if p.cacheRead != "" {
				fmt.Fprintf(&b, ", \"cache_read\": %s", p.cacheRead)
			}
			if p.cacheWrite != "" {
				fmt.Fprintf(&b, ", \"cache_write\": %s", p.cacheWrite)
			}
			b.WriteString("}")
		}
		fmt.Fprintf(&b, "], \"note\": %s}", str(e.note))
		if i < len(g.entries)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  ]\n}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ---- report ----

type stats struct {
	providers, models, written     int
	kinds                          map[string]int
	fallbackEntries                int
	shadowed, duplicate            int
	skipped                        map[string][]string // reason -> models
	approx                         []string
	tiered                         map[string]bool
	rounded                        map[string]bool // "provider/model key literal"
	timeOfDay, timeOfDayNotDefault []string
	ignoredKeys                    map[string]map[string]bool // price key -> models
}

func newStats() *stats {
	return &stats{kinds: map[string]int{}, skipped: map[string][]string{}, tiered: map[string]bool{}, rounded: map[string]bool{}, ignoredKeys: map[string]map[string]bool{}}
}

// skip files a model under its reason, with the model-specific detail of
// the "no per-token price" reason kept apart from the grouping.
func (s *stats) skip(reason, model string) {
	group, detail, found := strings.Cut(reason, " (")
	if !found {
		s.skipped[reason] = append(s.skipped[reason], model)
		return
	}
	s.skipped[group] = append(s.skipped[group], model+" ("+detail)
}

func (s *stats) print(w io.Writer, out string) {
	nSkipped := 0
	for _, ms := range s.skipped {
		nSkipped += len(ms)
	}
	total := s.kinds["model"] + s.kinds["pattern"] + s.kinds["regexp"]
	fmt.Fprintf(w, "genprices: %s %s: %d providers, %d models\n", pkgName, pkgVersion, s.providers, s.models)
	fmt.Fprintf(w, "wrote %s: %d models as %d entries (%d model, %d pattern, %d regexp), %d of them fallback copies (azure -> openai, google -> anthropic, ...)\n",
		out, s.written, total, s.kinds["model"], s.kinds["pattern"], s.kinds["regexp"], s.fallbackEntries)
	fmt.Fprintf(w, "left out %d exact names an earlier model of the same provider already matches, %d repeated rules\n", s.shadowed, s.duplicate)
	fmt.Fprintf(w, "skipped %d models:\n", nSkipped)
	reasons := make([]string, 0, len(s.skipped))
	for r := range s.skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  %d %s: %s\n", len(s.skipped[r]), r, strings.Join(s.skipped[r], ", "))
	}
	fmt.Fprintf(w, "approximated %d match rules:\n", len(s.approx))
	for _, a := range s.approx {
		fmt.Fprintf(w, "  %s\n", a)
	}
	fmt.Fprintf(w, "tiered prices at their base tier: %d models\n", len(s.tiered))
	rounded := make([]string, 0, len(s.rounded))
	for r := range s.rounded {
		rounded = append(rounded, r)
	}
	sort.Strings(rounded)
	fmt.Fprintf(w, "prices rounded to 9 decimals: %d (%s)\n", len(rounded), strings.Join(rounded, "; "))
	fmt.Fprintf(w, "time-of-day prices, the price in force most of the day: %s", strings.Join(s.timeOfDay, ", "))
	if len(s.timeOfDayNotDefault) > 0 {
		fmt.Fprintf(w, " (not genai-prices' fallback price for %s)", strings.Join(s.timeOfDayNotDefault, ", "))
	}
	fmt.Fprintln(w)
	keys := make([]string, 0, len(s.ignoredKeys))
	for k := range s.ignoredKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%d models)", k, len(s.ignoredKeys[k])))
	}
	fmt.Fprintf(w, "ignored non-token price keys (prices kept, these parts left out): %s\n", strings.Join(parts, ", "))
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
