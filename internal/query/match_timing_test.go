package query

import "testing"

const typicalQuery = `{ resource.service.name = "checkout" && span.http.status_code >= 500 && duration > 100ms && kind = server }`

func TestMatchDoesNotAllocate(t *testing.T) {
	s := fixture()
	for _, q := range []string{typicalQuery, `{ name =~ "GET .*" || .shared !~ "x.*" }`, `{ !(span.missing != nil) }`} {
		f := Filter{Expr: mustParse(t, q), Service: "checkout", MinDuration: 1}
		if !f.Match(s) {
			t.Fatalf("%s must match the fixture", q)
		}
		if n := testing.AllocsPerRun(100, func() { f.Match(s) }); n != 0 {
			t.Errorf("Match(%s) allocates %v times per call", q, n)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	s := fixture()
	f := Filter{Expr: mustParse(b, typicalQuery)}
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(s) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkMatchRegex(b *testing.B) {
	s := fixture()
	f := Filter{Expr: mustParse(b, `{ name =~ "GET /.*" && resource.deployment.environment =~ "prod-.*" }`)}
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(s) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParseTraceQL(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTraceQL(typicalQuery); err != nil {
			b.Fatal(err)
		}
	}
}
