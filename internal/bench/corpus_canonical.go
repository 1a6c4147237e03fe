package bench

import (
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// canonicalOps: 8 services with 6 or 7 operations each, 50 names in all.
var canonicalOps = []struct {
	service string
	lang    string
	ops     []string
}{
	{"frontend", "nodejs", []string{"GET /", "GET /product/{id}", "POST /cart", "GET /cart", "POST /checkout", "GET /search", "render page"}},
	{"cart", "dotnet", []string{"AddItem", "GetCart", "EmptyCart", "redis GET", "redis SET", "redis DEL"}},
	{"checkout", "go", []string{"PlaceOrder", "prepareOrder", "chargeCard", "shipOrder", "sendConfirmation", "validateAddress"}},
	{"payment", "nodejs", []string{"Charge", "validateCard", "fraudCheck", "tokenize", "POST /v1/charges", "refund"}},
	{"catalog", "go", []string{"ListProducts", "GetProduct", "SearchProducts", "SELECT products", "SELECT inventory", "cache lookup"}},
	{"shipping", "rust", []string{"GetQuote", "ShipOrder", "computeRate", "lookupCarrier", "SELECT zones", "POST /labels"}},
	{"currency", "cpp", []string{"Convert", "GetSupportedCurrencies", "loadRates", "roundAmount", "cache refresh", "parseRates", "format"}},
	{"email", "python", []string{"SendOrderConfirmation", "renderTemplate", "smtp send", "queue publish", "loadTemplate", "validateRecipient"}},
}

var (
	canonMethods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	canonOKCodes  = []int64{200, 200, 200, 200, 201, 204, 301, 304, 400, 404}
	canonBadCodes = []int64{500, 502, 503, 504}
	canonRegions  = []string{"us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2", "eu-central-1", "ap-south-1", "ap-northeast-1", "sa-east-1"}
	canonTiers    = []string{"free", "pro", "team", "enterprise"}
	canonUsers    = numbered("u-", 100, 3)
	canonErrors   = []string{"deadline exceeded", "connection refused", "upstream returned 503", "invalid argument", "internal error"}
)

// CanonicalUsers lists the 100 user.id values of the canonical corpus
// (each carried by about 1% of spans): the selective attribute filter.
func CanonicalUsers() []string { return append([]string(nil), canonUsers...) }

// genCanonical: traces of 6 to 14 spans (about 10) across 8 services and 50
// operation names; every span carries five attributes with at most 100
// short values each; about 2% of spans are errors.
func genCanonical(o CorpusOptions) []model.Span {
	g := newGen(o, 1)
	svcs := make([]*service, len(canonicalOps))
	for i, c := range canonicalOps {
		svcs[i] = newService(c.service, "2.4."+string(rune('0'+i)), c.lang, "io.opentelemetry."+c.lang)
	}
	type node struct {
		svc    int
		parent int
		depth  int
		span   model.Span
	}
	starts := g.startTimes(o.Spans/10+2, nil)
	for ti := 0; !g.full(); ti++ {
		var start time.Time
		if ti < len(starts) {
			start = starts[ti]
		} else {
			start = starts[len(starts)-1].Add(time.Duration(ti-len(starts)+1) * time.Millisecond)
		}
		tid := g.ids.traceID()
		n := 6 + g.r.IntN(9)
		nodes := make([]node, 0, n)
		user, tier, region := g.pick(canonUsers), g.pick(canonTiers), g.pick(canonRegions)
		for i := 0; i < n; i++ {
			nd := node{parent: -1}
			var pstart time.Time
			var pdur time.Duration
			var parentID model.SpanID
			if i == 0 {
				nd.svc = 0
				pstart, pdur = start, g.logNormal(40*time.Millisecond, 0.8)
			} else {
				for {
					nd.parent = g.r.IntN(len(nodes))
					if nodes[nd.parent].depth < 3 {
						break
					}
				}
				p := &nodes[nd.parent]
				nd.depth = p.depth + 1
				nd.svc = p.svc
				if g.r.IntN(10) < 6 {
					nd.svc = 1 + g.r.IntN(len(svcs)-1)
				}
				ps, pe := p.span.StartTimeUnixNano, p.span.EndTimeUnixNano
				pd := time.Duration(pe - ps)
				pstart = time.Unix(0, int64(ps)).Add(time.Duration(g.r.Float64() * 0.5 * float64(pd)))
				pdur = time.Duration((0.05 + g.r.Float64()*0.45) * float64(pd))
				parentID = p.span.SpanID
			}
			ops := canonicalOps[nd.svc].ops
			kind := model.KindInternal
			switch {
			case i == 0 || (nd.parent >= 0 && nodes[nd.parent].svc != nd.svc):
				kind = model.KindServer
			case g.r.IntN(3) == 0:
				kind = model.KindClient
			}
			s := g.span(svcs[nd.svc], tid, parentID, ops[g.r.IntN(len(ops))], kind, pstart, pdur)
			code := canonOKCodes[g.r.IntN(len(canonOKCodes))]
			if g.r.IntN(50) == 0 {
				code = canonBadCodes[g.r.IntN(len(canonBadCodes))]
				s.StatusCode = model.StatusError
				s.StatusMessage = g.pick(canonErrors)
			}
			s.Attributes = []model.KeyValue{
				str("http.request.method", g.pick(canonMethods)),
				integer("http.response.status_code", code),
				str("cloud.region", region),
				str("customer.tier", tier),
				str("user.id", user),
			}
			nd.span = s
			nodes = append(nodes, nd)
		}
		for _, nd := range nodes {
			if !g.emit(nd.span) {
				break
			}
		}
	}
	return g.out
}
