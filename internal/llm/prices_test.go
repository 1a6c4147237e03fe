package llm

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCost(t *testing.T, p *Prices, provider, model string, at time.Time, in, out, cr, cw int64) int64 {
	t.Helper()
	n, ok := p.Cost(provider, model, at, in, out, cr, cw)
	if !ok {
		t.Fatalf("Cost(%q, %q, %s): no price", provider, model, at.Format(time.DateOnly))
	}
	return n
}

func TestDefaultPricesLoad(t *testing.T) {
	p := DefaultPrices()
	if p.AsOf() == "" {
		t.Error("built-in table has no as_of date")
	}
	at := day("2025-10-20")
	// One current model per major provider must be priced.
	for _, c := range []struct{ provider, model string }{
		{"openai", "gpt-4o"}, {"openai", "gpt-4o-mini-2024-07-18"}, {"openai", "gpt-4.1"}, {"openai", "o3-mini"}, {"openai", "gpt-5"},
		{"openai", "text-embedding-3-small"},
		{"anthropic", "claude-3-5-sonnet-20241022"}, {"anthropic", "claude-sonnet-4-20250514"}, {"anthropic", "claude-opus-4-1-20250805"},
		{"gcp.gemini", "gemini-2.5-pro"}, {"gcp.vertex_ai", "gemini-1.5-pro-002"}, {"gcp.gemini", "gemini-2.0-flash"},
		{"aws.bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0"}, {"aws.bedrock", "us.anthropic.claude-3-5-haiku-20241022-v1:0"},
		{"aws.bedrock", "amazon.nova-pro-v1:0"},
		{"mistral_ai", "mistral-large-2411"}, {"mistral_ai", "mistral-small-latest"},
		{"deepseek", "deepseek-chat"}, {"x_ai", "grok-3"}, {"cohere", "command-r-plus-08-2024"},
	} {
		if n, ok := p.Cost(c.provider, c.model, at, 1000, 1000, 0, 0); !ok || n <= 0 {
			t.Errorf("%s %s: cost %d ok=%v, want a price", c.provider, c.model, n, ok)
		}
	}
}

func TestCostArithmetic(t *testing.T) {
	p := DefaultPrices()
	at := day("2025-09-01")
	// claude-sonnet-4: 3 in, 15 out, 0.30 cache read, 3.75 cache write (USD per million).
	// 10000 input of which 6000 read from cache and 2000 written: cached tokens are
	// priced at their own price and not again at the input price.
	got := mustCost(t, p, "anthropic", "claude-sonnet-4-20250514", at, 10000, 500, 6000, 2000)
	want := int64(2000*3000 + 6000*300 + 2000*3750 + 500*15000)
	if got != want {
		t.Errorf("cost = %d nano-USD, want %d", got, want)
	}
	// Fractions of a nano-USD per token are exact: gemini-1.5-flash cache read 0.01875 USD/M.
	// 18.75 nano-USD per token: 1000 tokens cost exactly 18750, not 19000.
	got = mustCost(t, p, "gcp.gemini", "gemini-1.5-flash-002", at, 1000, 0, 1000, 0)
	if got != 18750 {
		t.Errorf("1000 cached flash tokens = %d nano-USD, want 18750", got)
	}
	// No cache price in the entry: cached tokens cost the input price.
	got = mustCost(t, p, "openai", "gpt-4-turbo", at, 1000, 0, 400, 0)
	if got != 1000*10000 {
		t.Errorf("gpt-4-turbo with cache = %d, want %d", got, 1000*10000)
	}
	// Huge counts do not overflow silently.
	if _, ok := p.Cost("openai", "gpt-4o", at, 1<<62, 1<<62, 0, 0); ok {
		t.Error("overflowing cost reported ok")
	}
}

func TestExactBeforePattern(t *testing.T) {
	p := DefaultPrices()
	at := day("2025-01-10")
	// gpt-4o-2024-05-13 has its own exact entry (5/15) although gpt-4o-2024-* (2.50/10) matches too.
	if got := mustCost(t, p, "openai", "gpt-4o-2024-05-13", at, 1000, 0, 0, 0); got != 1000*5000 {
		t.Errorf("exact entry: %d, want %d", got, 1000*5000)
	}
	if got := mustCost(t, p, "openai", "gpt-4o-2024-11-20", at, 1000, 0, 0, 0); got != 1000*2500 {
		t.Errorf("pattern entry: %d, want %d", got, 1000*2500)
	}
	// Case does not matter.
	if got := mustCost(t, p, "OpenAI", "GPT-4o-2024-11-20", at, 1000, 0, 0, 0); got != 1000*2500 {
		t.Errorf("upper case: %d", got)
	}
	if _, ok := p.Cost("openai", "gpt-4o-2024", at, 1, 1, 0, 0); ok {
		t.Error("gpt-4o-2024 matched gpt-4o-2024-* (the dash is literal)")
	}
}

func TestEffectiveDates(t *testing.T) {
	p := DefaultPrices()
	// genai-prices' openai/o3: input 10 (output 40) until 2025-06-10, then 2 (8).
	if got := mustCost(t, p, "openai", "o3", day("2025-06-09").Add(23*time.Hour), 1000, 0, 0, 0); got != 1000*10000 {
		t.Errorf("before the cut: %d", got)
	}
	if got := mustCost(t, p, "openai", "o3-2025-04-16", day("2025-06-10"), 1000, 1000, 0, 0); got != 1000*2000+1000*8000 {
		t.Errorf("on the day of the cut: %d", got)
	}
	// genai-prices gives gpt-4o one undated price: it applies at any time.
	if got := mustCost(t, p, "openai", "gpt-4o", day("2023-01-01"), 1000, 0, 0, 0); got != 1000*2500 {
		t.Errorf("undated price in 2023: %d", got)
	}
	// A call before an entry's first price gets no cost.
	u, err := LoadPrices(writeFile(t, `{"models": [{"model": "acme-1", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Cost("", "acme-1", day("2024-12-31").Add(23*time.Hour), 1000, 0, 0, 0); ok {
		t.Error("priced a call before the model's first price")
	}
	if got := mustCost(t, u, "", "acme-1", day("2025-01-01"), 1000, 0, 0, 0); got != 1000*1000 {
		t.Errorf("on the first day: %d", got)
	}
}

// TestGeneratedTable checks the built-in table generated from genai-prices
// (scripts/genprices). Expected figures are genai-prices 0.1.8's own, read
// from its data (dist/index.js) and checked with its calcPrice.
func TestGeneratedTable(t *testing.T) {
	p := DefaultPrices()
	if p.Source() != "@pydantic/genai-prices 0.1.8" || p.AsOf() != "2026-09-23" {
		t.Errorf("source %q, as_of %q", p.Source(), p.AsOf())
	}
	rows := p.Rows()
	models := map[string]bool{}
	for _, r := range rows {
		if r.User || len(r.Providers) == 0 || len(r.Periods) == 0 || r.Note == "" {
			t.Fatalf("built-in row %+v: want restricted to providers, with periods and a note, not User", r)
		}
		models[r.Note] = true
	}
	// 1694 models in the package, 14 skipped (priced per audio hour or
	// document page only); fallback copies (azure -> openai, ...) add notes.
	if len(rows) < 2500 || len(models) < 1500 {
		t.Errorf("%d rows for %d genai-prices models: the table looks truncated", len(rows), len(models))
	}
	at := day("2026-01-01")
	for _, c := range []struct {
		provider, model      string
		in, out, read, write int64 // nano-USD per token (USD per million x 1000)
	}{
		// openai/gpt-4o: input 2.5, cache_read 1.25, output 10; no cache write price.
		{"openai", "gpt-4o-2024-08-06", 2500, 10000, 1250, 2500},
		// anthropic/claude-sonnet-4-5: base tier 3 / 15 / 0.3 / 3.75 (6 / 22.5 / 0.6 / 7.5 past 200k tokens).
		{"anthropic", "claude-sonnet-4-5-20250929", 3000, 15000, 300, 3750},
		// google/gemini-2.5-pro: base tier 1.25 / 10 / cache read 0.125.
		{"gcp.gemini", "gemini-2.5-pro", 1250, 10000, 125, 1250},
		{"gcp.vertex_ai", "gemini-2.5-pro-preview-06-05", 1250, 10000, 125, 1250},
		// aws/amazon.nova-pro-v1:0 (contains "amazon.nova-pro"): 0.8 / 3.2 / 0.2.
		{"aws.bedrock", "us.amazon.nova-pro-v1:0", 800, 3200, 200, 800},
		// deepseek/deepseek-chat: 0.27 / 1.1 / 0.07 from 00:30 to 16:30 UTC, else 0.135 / 0.55 / 0.035:
		// the table keeps the price in force for most of the day.
		{"deepseek", "deepseek-chat", 270, 1100, 70, 270},
	} {
		got := [4]int64{
			mustCost(t, p, c.provider, c.model, at, 1000, 0, 0, 0),
			mustCost(t, p, c.provider, c.model, at, 0, 1000, 0, 0),
			mustCost(t, p, c.provider, c.model, at, 1000, 0, 1000, 0),
			mustCost(t, p, c.provider, c.model, at, 1000, 0, 0, 1000),
		}
		if want := [4]int64{1000 * c.in, 1000 * c.out, 1000 * c.read, 1000 * c.write}; got != want {
			t.Errorf("%s %s: 1000 tokens of input, output, cache read, cache write = %v nano-USD, want %v", c.provider, c.model, got, want)
		}
	}
	// The gemini-2.5-pro TTS models have exact entries, ahead of the gemini-2.5-pro* pattern.
	if got := mustCost(t, p, "gcp.gemini", "gemini-2.5-pro-preview-tts", at, 1000, 1000, 0, 0); got != 1000*1000+1000*20000 {
		t.Errorf("gemini-2.5-pro-preview-tts: %d", got)
	}
}

// TestBuiltinProviders: built-in entries are restricted to the provider
// genai-prices files them under (and the providers that fall back to it).
func TestBuiltinProviders(t *testing.T) {
	p := DefaultPrices()
	at := day("2026-01-01")
	for _, provider := range []string{"openai", "azure", "az.ai.openai", ""} {
		if got := mustCost(t, p, provider, "gpt-4o", at, 1000, 0, 0, 0); got != 1000*2500 {
			t.Errorf("gpt-4o from %q: %d", provider, got)
		}
	}
	if _, ok := p.Cost("anthropic", "gpt-4o", at, 1000, 0, 0, 0); ok {
		t.Error("anthropic priced gpt-4o: genai-prices has no such Anthropic model")
	}
	// Claude on Vertex AI is priced by Google's own Claude entries.
	if got := mustCost(t, p, "gcp.vertex_ai", "claude-sonnet-4-5@20250929", at, 1000, 1000, 0, 0); got != 1000*3000+1000*15000 {
		t.Errorf("claude-sonnet-4-5 on Vertex AI: %d", got)
	}
}

// TestUserFileFirst: an entry of the user file wins over any built-in one
// that matches, even a built-in exact entry restricted to the span's
// provider.
func TestUserFileFirst(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{"models": [
		{"pattern": "gpt-4o-mini*", "prices": [{"from": "2024-01-01", "input": 9, "output": 9}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	at := day("2026-01-01")
	if got := mustCost(t, p, "openai", "gpt-4o-mini", at, 1000, 0, 0, 0); got != 1000*9000 {
		t.Errorf("user pattern vs built-in exact: %d", got)
	}
	// A model the user file does not match falls through to the built-in table.
	if got := mustCost(t, p, "openai", "gpt-4o", at, 1000, 0, 0, 0); got != 1000*2500 {
		t.Errorf("fall through: %d", got)
	}
}

func TestRowsAndSource(t *testing.T) {
	path := writeFile(t, `{"source": "acme contract", "models": [
		{"model": "gpt-4o", "providers": ["OpenAI"], "prices": [{"from": "2025-01-01", "input": 1.5, "output": 6, "cache_read": 0.75}], "note": "negotiated"},
		{"pattern": "acme-*", "prices": [{"from": "2025-02-01", "input": 0.000000001, "output": 2}, {"from": "2025-01-01", "input": 3, "output": 4, "cache_write": 0}]}
	]}`)
	p, err := LoadPrices(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "@pydantic/genai-prices 0.1.8 + " + path + " (acme contract)"; p.Source() != want {
		t.Errorf("source %q, want %q", p.Source(), want)
	}
	rows := p.Rows()
	want := []PriceRow{
		{Match: "model", Text: "gpt-4o", Providers: []string{"openai"}, Note: "negotiated", User: true, Periods: []PricePeriod{
			{From: day("2025-01-01"), Input: 1.5, Output: 6, CacheRead: 0.75, CacheWrite: 1.5}}},
		{Match: "pattern", Text: "acme-*", User: true, Periods: []PricePeriod{
			{From: day("2025-01-01"), Input: 3, Output: 4, CacheRead: 3, CacheWrite: 0},
			{From: day("2025-02-01"), Input: 1e-9, Output: 2, CacheRead: 1e-9, CacheWrite: 1e-9}}},
	}
	if len(rows) < 2 || !reflect.DeepEqual(rows[:2], want) {
		t.Fatalf("user rows:\n got  %+v\n want %+v", rows[:min(2, len(rows))], want)
	}
	builtin := DefaultPrices().Rows()
	// The user's gpt-4o for openai replaced the built-in one; the rest follow in order.
	if len(rows) != len(builtin)+1 {
		t.Errorf("%d rows, want %d (built-in %d + 2 user - 1 replaced)", len(rows), len(builtin)+1, len(builtin))
	}
	rest := slices.DeleteFunc(slices.Clone(builtin), func(r PriceRow) bool {
		return r.Match == "model" && r.Text == "gpt-4o" && slices.Equal(r.Providers, []string{"openai"})
	})
	if !reflect.DeepEqual(rows[2:], rest) {
		t.Error("built-in rows after the user's differ from the built-in table less the replaced entry")
	}
	// Rows returns copies.
	rows[0].Providers[0] = "changed"
	rows[0].Periods[0].Input = 99
	if r := p.Rows()[0]; r.Providers[0] != "openai" || r.Periods[0].Input != 1.5 {
		t.Error("Rows shares memory with the table")
	}
	// Without a "source" in the file, the path alone.
	q, err := LoadPrices(writeFile(t, `{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q.Source(), "@pydantic/genai-prices 0.1.8 + ") || !strings.HasSuffix(q.Source(), "prices.json") {
		t.Errorf("source %q", q.Source())
	}
}

func TestProviderAware(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{"models": [
		{"model": "llama-3.3-70b", "providers": ["groq"], "prices": [{"from": "2025-01-01", "input": "0.59", "output": "0.79"}]},
		{"model": "llama-3.3-70b", "providers": ["aws.bedrock"], "prices": [{"from": "2025-01-01", "input": "0.72", "output": "0.72"}]},
		{"model": "llama-3.3-70b", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]},
		{"pattern": "*llama-4*", "providers": ["groq"], "prices": [{"from": "2025-01-01", "input": 0.1, "output": 0.1}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	at := day("2025-03-01")
	for _, c := range []struct {
		provider string
		want     int64
	}{{"groq", 590}, {"Bedrock", 720}, {"together", 1000}, {"", 1000}} {
		if got := mustCost(t, p, c.provider, "llama-3.3-70b", at, 1, 0, 0, 0); got != c.want {
			t.Errorf("provider %q: %d, want %d", c.provider, got, c.want)
		}
	}
	if _, ok := p.Cost("together", "llama-4-scout", at, 1, 0, 0, 0); ok {
		t.Error("a provider-restricted pattern priced another provider's model")
	}
	if got := mustCost(t, p, "", "llama-4-scout", at, 1_000_000, 0, 0, 0); got != 100_000_000 {
		t.Errorf("no provider named: restricted entry should apply: %d", got)
	}
}

func TestRegexpEntry(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{"models": [
		{"regexp": "acme-(small|tiny)-v[0-9]+", "prices": [{"from": "2025-01-01", "input": 1, "output": 2}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	at := day("2025-03-01")
	if got := mustCost(t, p, "", "ACME-small-v2", at, 1, 1, 0, 0); got != 3000 {
		t.Errorf("regexp cost %d", got)
	}
	if _, ok := p.Cost("", "acme-small-v2-extra", at, 1, 1, 0, 0); ok {
		t.Error("regexp must match the whole name")
	}
}

func TestOverrideReplacesAndExtends(t *testing.T) {
	p, err := LoadPrices(writeFile(t, `{
		"as_of": "2030-01-01",
		"models": [
			{"model": "gpt-4o", "prices": [{"from": "2024-01-01", "input": 1, "output": 1}]},
			{"pattern": "claude-3-5-sonnet*", "prices": [{"from": "2024-01-01", "input": 7, "output": 7}]},
			{"model": "in-house-7b", "prices": [{"from": "2024-01-01", "input": 0.01, "output": 0.02}]}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	at := day("2025-03-01")
	if got := mustCost(t, p, "openai", "gpt-4o", at, 1000, 0, 0, 0); got != 1000*1000 {
		t.Errorf("replaced exact entry: %d", got)
	}
	// Replaced means replaced: the old 2024-05-13 period is gone too.
	if got := mustCost(t, p, "openai", "gpt-4o", day("2024-06-01"), 1000, 0, 0, 0); got != 1000*1000 {
		t.Errorf("replaced entry kept an old period: %d", got)
	}
	if got := mustCost(t, p, "anthropic", "claude-3-5-sonnet-20241022", at, 1000, 0, 0, 0); got != 1000*7000 {
		t.Errorf("replaced pattern entry: %d", got)
	}
	if got := mustCost(t, p, "", "in-house-7b", at, 1_000_000, 1_000_000, 0, 0); got != 30_000_000 {
		t.Errorf("added entry: %d", got)
	}
	if got := mustCost(t, p, "openai", "gpt-4o-mini", at, 1000, 0, 0, 0); got != 1000*150 {
		t.Errorf("untouched built-in entry: %d", got)
	}
	if p.AsOf() != "2030-01-01" {
		t.Errorf("as_of %q", p.AsOf())
	}
	// The built-in table itself is unchanged.
	if got := mustCost(t, DefaultPrices(), "openai", "gpt-4o", at, 1000, 0, 0, 0); got != 1000*2500 {
		t.Errorf("LoadPrices modified the built-in table: %d", got)
	}
}

func TestBadPriceFiles(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"not json":          {`{`, "unexpected EOF"},
		"no models":         {`{"models": []}`, "no entries"},
		"unknown top field": {`{"modles": []}`, `unknown field "modles"`},
		"unknown entry field": {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}], "inptu": 1}]}`,
			`models[0]: json: unknown field "inptu"`},
		"no match field":  {`{"models": [{"prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`, `models[0]: exactly one of`},
		"two match field": {`{"models": [{"model": "a", "pattern": "b*", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`, `models[0]: exactly one of`},
		"bad regexp":      {`{"models": [{"regexp": "a(", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`, `models[0]: field "regexp"`},
		"no prices":       {`{"models": [{"model": "m", "prices": []}]}`, `models[0]: model:m: field "prices" has no entries`},
		"bad date":        {`{"models": [{"model": "m", "prices": [{"from": "01/02/2025", "input": 1, "output": 1}]}]}`, `prices[0]: field "from" "01/02/2025"`},
		"missing from":    {`{"models": [{"model": "m", "prices": [{"input": 1, "output": 1}]}]}`, `prices[0]: field "from" is missing`},
		"missing output":  {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1}]}]}`, `"input" and "output" are required`},
		"negative":        {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": -1, "output": 1}]}]}`, `field "input": "-1"`},
		"too precise":     {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 0.0000000001, "output": 1}]}]}`, `field "input"`},
		"bad cache":       {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1, "cache_read": "x"}]}]}`, `models[0]`},
		"same day twice": {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}, {"from": "2025-01-01", "input": 2, "output": 2}]}]}`,
			"two prices take effect on 2025-01-01"},
		"duplicate entry": {`{"models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}, {"model": "M", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`,
			"models[1]: same model and providers as models[0]"},
		"currency": {`{"currency": "EUR", "models": [{"model": "m", "prices": [{"from": "2025-01-01", "input": 1, "output": 1}]}]}`, `currency "EUR"`},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, c.body)
			_, err := LoadPrices(path)
			if err == nil {
				t.Fatal("LoadPrices accepted a bad file")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q should name the file and contain %q", err, c.want)
			}
		})
	}
	if _, err := LoadPrices(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"gpt-4o-2024-*", "gpt-4o-2024-08-06", true},
		{"gpt-4o-2024-*", "gpt-4o-mini-2024-07-18", false},
		{"*anthropic.claude-3-5-sonnet*", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"a*a", "a", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"*", "", true},
	} {
		if got := globMatch(strings.Split(c.pattern, "*"), c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}
