// Command absent times searches for user.id values against a running rastro
// server holding the canonical corpus (rastro load --seed 1): by default
// values no span has (u-NNNN and u-1NN that share a prefix or the shape of
// the corpus's u-000..u-099, U-0NN case variants, random request ids), each
// answer checked to be empty; with -present, the corpus's own users, each
// answer checked to be non-empty. Ten warm-up queries are not timed. It
// prints end-to-end and Server-Timing percentiles (nearest rank). run.sh
// drives it for docs/benchmarks/canonical.md, "Absent values (issue 23)".
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func pct(d []float64, p float64) float64 {
	s := append([]float64(nil), d...)
	sort.Float64s(s)
	i := int(p*float64(len(s))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func main() {
	base := flag.String("url", "http://127.0.0.1:4318", "")
	n := flag.Int("n", 200, "timed queries")
	seed := flag.Uint64("seed", 7, "")
	present := flag.Bool("present", false, "query present user ids (u-000..u-099), expecting spans")
	numbers := flag.Bool("tempo-numbers", false, "query Tempo's tag search (GET /api/search?tags=) for absent values that read as numbers: "+
		"user.id=NNNNNN and http.response.status_code=6NN..9NN, which Tempo's search turns into (. = \"N\" || . = N)")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, 1))
	var vals []string
	for *numbers && len(vals) < *n+10 {
		if r.IntN(2) == 0 {
			vals = append(vals, fmt.Sprintf("user.id=%06d", r.IntN(1000000)))
		} else {
			vals = append(vals, fmt.Sprintf("http.response.status_code=%d", 600+r.IntN(400)))
		}
	}
	for *present && len(vals) < *n+10 {
		vals = append(vals, fmt.Sprintf("u-%03d", r.IntN(100)))
	}
	for len(vals) < *n+10 {
		switch r.IntN(4) {
		case 0:
			vals = append(vals, fmt.Sprintf("u-%04d", r.IntN(10000))) // shares a prefix with u-NNN
		case 1:
			vals = append(vals, fmt.Sprintf("u-%d", 100+r.IntN(900))) // same shape, not in the corpus
		case 2:
			vals = append(vals, fmt.Sprintf("U-%03d", r.IntN(100))) // case variant
		default:
			vals = append(vals, fmt.Sprintf("req-%016x", r.Uint64()))
		}
	}
	c := &http.Client{}
	var total, server []float64
	slow := map[string]float64{}
	for i, v := range vals {
		q := fmt.Sprintf(`{ span.user.id = %q }`, v)
		u := *base + "/api/v1/spans?limit=20&since=all&q=" + url.QueryEscape(q)
		empty := `"spans":[]`
		if *numbers {
			u = *base + "/api/search?limit=20&start=0&end=" + strconv.FormatInt(time.Now().Unix()+3600, 10) + "&tags=" + url.QueryEscape(v)
			empty = `"traces":[]`
		}
		t0 := time.Now()
		resp, err := c.Get(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := float64(time.Since(t0).Microseconds()) / 1000
		if resp.StatusCode != 200 || *present == strings.Contains(string(body), empty) {
			fmt.Fprintf(os.Stderr, "%s: status %d: %.200s\n", v, resp.StatusCode, body)
			os.Exit(1)
		}
		st := resp.Header.Get("Server-Timing")
		sd := -1.0 // a server without Server-Timing on the route
		if i := strings.Index(st, "dur="); i >= 0 {
			sd, _ = strconv.ParseFloat(st[i+4:], 64)
		}
		if i < 10 {
			continue
		}
		total, server = append(total, d), append(server, sd)
		if d > 5 {
			slow[v] = d
		}
	}
	what := "absent user.id"
	if *present {
		what = "present user.id"
	}
	if *numbers {
		what = "Tempo tag search for absent numbers"
	}
	fmt.Printf("%s, %d queries: end-to-end p50 %.3f p95 %.3f p99 %.3f max %.3f ms; Server-Timing p50 %.3f p95 %.3f p99 %.3f max %.3f ms; %d slower than 5 ms\n",
		what, len(total), pct(total, .5), pct(total, .95), pct(total, .99), pct(total, 1), pct(server, .5), pct(server, .95), pct(server, .99), pct(server, 1), len(slow))
}
