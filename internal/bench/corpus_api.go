package bench

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/model"
)

// dailyCurve is the relative request rate at t, in (0, 1]: a trough at 03:00
// UTC at a quarter of the peak, a peak at 15:00 UTC.
func dailyCurve(t time.Time) float64 {
	h := float64(t.UTC().Hour()) + float64(t.UTC().Minute())/60
	return 0.25 + 0.75*(0.5-0.5*math.Cos(2*math.Pi*(h-3)/24))
}

// IncidentWindow returns when the api corpus generated with o has its
// incident: from 70% of the window, lasting a twelfth of it. During the
// incident the orders service answers about 30% 5xx and six times slower.
func IncidentWindow(o CorpusOptions) (from, to time.Time) {
	w := o.window()
	from = o.Start.Add(w * 7 / 10)
	return from, from.Add(w / 12)
}

type apiRoute struct {
	method, route, service string
	table                  string // db table touched, "" for none
	median                 time.Duration
}

var apiRoutes = []apiRoute{
	{"GET", "/api/v1/users/{id}", "users", "users", 12 * time.Millisecond},
	{"PATCH", "/api/v1/users/{id}", "users", "users", 25 * time.Millisecond},
	{"POST", "/api/v1/login", "users", "sessions", 60 * time.Millisecond},
	{"POST", "/api/v1/logout", "users", "sessions", 8 * time.Millisecond},
	{"GET", "/api/v1/accounts/{id}", "accounts", "accounts", 15 * time.Millisecond},
	{"GET", "/api/v1/accounts/{id}/members", "accounts", "members", 30 * time.Millisecond},
	{"POST", "/api/v1/accounts/{id}/invites", "accounts", "invites", 45 * time.Millisecond},
	{"GET", "/api/v1/orders", "orders", "orders", 40 * time.Millisecond},
	{"GET", "/api/v1/orders/{id}", "orders", "orders", 18 * time.Millisecond},
	{"POST", "/api/v1/orders", "orders", "orders", 90 * time.Millisecond},
	{"DELETE", "/api/v1/orders/{id}", "orders", "orders", 35 * time.Millisecond},
	{"GET", "/api/v1/products", "catalog", "products", 22 * time.Millisecond},
	{"GET", "/api/v1/products/{id}", "catalog", "products", 9 * time.Millisecond},
	{"GET", "/api/v1/search", "catalog", "", 120 * time.Millisecond},
	{"POST", "/api/v1/payments", "billing", "payments", 250 * time.Millisecond},
	{"GET", "/api/v1/invoices", "billing", "invoices", 55 * time.Millisecond},
	{"GET", "/api/v1/invoices/{id}/pdf", "billing", "", 400 * time.Millisecond},
	{"POST", "/api/v1/webhooks/stripe", "billing", "payments", 70 * time.Millisecond},
	{"GET", "/healthz", "gateway", "", time.Millisecond},
	{"GET", "/metrics", "gateway", "", 3 * time.Millisecond},
}

var apiServiceNames = []string{"gateway", "users", "accounts", "orders", "catalog", "billing"}

// genAPI: HTTP server traffic through a gateway into five services: routes,
// methods, status codes, user_id / account_id correlation attributes, a
// daily rate curve, and one incident (see IncidentWindow).
func genAPI(o CorpusOptions) []model.Span {
	g := newGen(o, 3)
	svcs := map[string]*service{}
	for i, n := range apiServiceNames {
		svcs[n] = newService("api-"+n, fmt.Sprintf("3.%d.0", i), "java", "io.opentelemetry.tomcat-10.0")
	}
	gw := svcs["gateway"]
	users := numbered("usr_", 5000, 5)
	accounts := numbered("acct_", 400, 4)
	incFrom, incTo := IncidentWindow(o)
	starts := g.startTimes(o.Spans/3+2, dailyCurve)
	for ti := 0; !g.full(); ti++ {
		start := starts[min(ti, len(starts)-1)].Add(time.Duration(max(0, ti-len(starts)+1)) * time.Millisecond)
		rt := apiRoutes[g.r.IntN(len(apiRoutes))]
		incident := rt.service == "orders" && !start.Before(incFrom) && start.Before(incTo)
		ui := g.r.IntN(len(users))
		user, account := users[ui], accounts[ui%len(accounts)]
		d := g.logNormal(rt.median, 0.6)
		code := int64(200)
		switch k := g.r.IntN(1000); {
		case incident && k < 300:
			code = []int64{500, 503, 504}[k%3]
		case k < 5:
			code = 500
		case k < 20:
			code = 404
		case k < 30:
			code = 401
		case k < 40:
			code = 400
		case k < 45:
			code = 429
		case rt.method == "POST":
			code = 201
		case rt.method == "DELETE":
			code = 204
		}
		if incident {
			d *= 6
		}
		path := strings.ReplaceAll(rt.route, "{id}", fmt.Sprint(1000+g.r.IntN(90000)))
		tid := g.ids.traceID()
		httpAttrs := func(extra ...model.KeyValue) []model.KeyValue {
			kv := []model.KeyValue{
				str("http.request.method", rt.method), str("http.route", rt.route), str("url.path", path),
				str("url.scheme", "https"), integer("http.response.status_code", code),
				str("user_id", user), str("account_id", account),
			}
			return append(kv, extra...)
		}
		root := g.span(gw, tid, model.SpanID{}, rt.method+" "+rt.route, model.KindServer, start, d)
		root.Attributes = httpAttrs(str("client.address", fmt.Sprintf("10.%d.%d.%d", ui%7, ui%251, ui%13)), str("user_agent.original", "Mozilla/5.0"))
		if code >= 500 {
			root.StatusCode = model.StatusError
			root.Attributes = append(root.Attributes, str("error.type", fmt.Sprint(code)))
		}
		if !g.emit(root) || rt.service == "gateway" {
			continue
		}
		inner := d * 8 / 10
		srv := g.span(svcs[rt.service], tid, root.SpanID, rt.method+" "+rt.route, model.KindServer, start.Add(d/20), inner)
		srv.Attributes = httpAttrs(str("server.address", "api-"+rt.service))
		srv.StatusCode = root.StatusCode
		if code >= 500 {
			srv.StatusMessage = "upstream request failed"
			if incident {
				srv.StatusMessage = "connection pool exhausted"
			}
		}
		if !g.emit(srv) || rt.table == "" {
			continue
		}
		op := map[string]string{"GET": "SELECT", "POST": "INSERT", "PATCH": "UPDATE", "DELETE": "DELETE"}[rt.method]
		db := g.span(svcs[rt.service], tid, srv.SpanID, op+" "+rt.table, model.KindClient, start.Add(d/10), inner/2)
		db.Attributes = []model.KeyValue{
			str("db.system.name", "postgresql"), str("db.operation.name", op), str("db.collection.name", rt.table),
			str("db.namespace", "app"), str("server.address", "pg-primary"),
		}
		g.emit(db)
	}
	return g.out
}
