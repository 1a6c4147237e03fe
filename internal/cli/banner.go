package cli

import (
	"fmt"
	"io"
	"net/url"
	"strings"
)

// banner is what `rastro serve` prints on stdout once its ports are bound:
// where to send data and what to open. The logs (stderr) carry the same
// facts as fields, for machines.
type banner struct {
	version string
	dataDir string
	http    string // scheme://host:port
	grpc    string // host:port, "" when off
	ui      bool
	also    []string // the extra HTTP addresses (Tempo, Jaeger, Zipkin ports)
	opening string   // what start-up does next: "replaying the WAL"
}

func (b *banner) write(w io.Writer) {
	var s strings.Builder
	fmt.Fprintf(&s, "rastro %s\n", b.version)
	row := func(k, v string) { fmt.Fprintf(&s, "  %-10s %s\n", k, v) }
	row("data", b.dataDir)
	row("OTLP/HTTP", b.http+"/v1/traces")
	if b.grpc != "" {
		row("OTLP/gRPC", b.grpc)
	} else {
		row("OTLP/gRPC", "off (--grpc-addr)")
	}
	row("API", b.http+"/api/v1/")
	if b.ui {
		row("web UI", b.http+"/")
	} else {
		row("web UI", "off (--ui=false)")
	}
	for _, a := range b.also {
		if a != "" {
			row("also", "http://"+a+"/")
		}
	}
	fmt.Fprintf(&s, "%s...\n", b.opening)
	io.WriteString(w, s.String())
}

// clickHouseHost is the host of a --clickhouse-url, without credentials.
func clickHouseHost(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "--clickhouse-url"
	}
	return u.Host + u.Path
}
