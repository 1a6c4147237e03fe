package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a leaf certificate for 127.0.0.1 (server) or a client, and
// returns its certificate and key as PEM.
func (ca *testCA) issue(t *testing.T, serial int64, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "rastro-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writeFiles writes name -> content into dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// httpsGet fetches path over a new TLS connection and returns the status
// and the serial number of the server's certificate.
func httpsGet(base, path string, cfg *tls.Config) (int, int64, error) {
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(base + path)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestTLS serves HTTP and gRPC over TLS with certificates made here,
// reloads a new certificate (SIGHUP in rastro serve calls Reload), and
// keeps the old one when the new files do not load.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newTestCA(t, "ca-1"), newTestCA(t, "ca-2")
	c1, k1 := ca1.issue(t, 101, false)
	writeFiles(t, dir, map[string][]byte{"cert.pem": c1, "key.pem": k1})
	ts := startServer(t, Options{TLSCert: filepath.Join(dir, "cert.pem"), TLSKey: filepath.Join(dir, "key.pem")})
	base := "https://" + ts.srv.HTTPAddr()

	code, serial, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: ca1.pool()})
	if err != nil || code != 200 || serial != 101 {
		t.Fatalf("HTTPS: %d, certificate %d, %v", code, serial, err)
	}
	// Plain HTTP on the TLS port is not served.
	if resp, err := http.Get("http://" + ts.srv.HTTPAddr() + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP served on the TLS port")
		}
	}
	grpcTLS := func(ca *testCA, cert ...tls.Certificate) error {
		return exportGRPC(t, ts.srv.GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(
			credentials.NewTLS(&tls.Config{RootCAs: ca.pool(), Certificates: cert}))})
	}
	if err := grpcTLS(ca1); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	if err := exportGRPC(t, ts.srv.GRPCAddr(), nil); err == nil {
		t.Fatal("gRPC without TLS accepted on the TLS port")
	}

	// A new certificate from another CA, loaded on reload.
	c2, k2 := ca2.issue(t, 202, false)
	writeFiles(t, dir, map[string][]byte{"cert.pem": c2, "key.pem": k2})
	if err := ts.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, serial, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: ca2.pool()}); err != nil || code != 200 || serial != 202 {
		t.Fatalf("after reload: %d, certificate %d, %v", code, serial, err)
	}
	if _, _, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: ca1.pool()}); err == nil {
		t.Fatal("after reload the old certificate is still served")
	}
	if err := grpcTLS(ca2); err != nil {
		t.Fatalf("gRPC after reload: %v", err)
	}

	// A key that does not match: the reload fails, the certificate stays.
	writeFiles(t, dir, map[string][]byte{"key.pem": k1})
	if err := ts.srv.Reload(); err == nil {
		t.Fatal("a certificate with another's key reloaded")
	}
	if code, serial, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: ca2.pool()}); err != nil || code != 200 || serial != 202 {
		t.Fatalf("after a failed reload: %d, certificate %d, %v", code, serial, err)
	}
}

// TestTLSClientCertificates: with a client CA, HTTP and gRPC clients
// without a certificate it signed are refused at the handshake.
func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	c, k := serverCA.issue(t, 1, false)
	writeFiles(t, dir, map[string][]byte{"cert.pem": c, "key.pem": k, "clients.pem": clientCA.pem})
	ts := startServer(t, Options{TLSCert: filepath.Join(dir, "cert.pem"), TLSKey: filepath.Join(dir, "key.pem"),
		TLSClientCA: filepath.Join(dir, "clients.pem")})
	base := "https://" + ts.srv.HTTPAddr()
	keyPair := func(ca *testCA) tls.Certificate {
		cp, kp := ca.issue(t, 7, true)
		pair, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	good, bad := keyPair(clientCA), keyPair(otherCA)
	if code, _, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: serverCA.pool(), Certificates: []tls.Certificate{good}}); err != nil || code != 200 {
		t.Fatalf("client certificate of the client CA: %d %v", code, err)
	}
	for what, certs := range map[string][]tls.Certificate{"no client certificate": nil, "a certificate of another CA": {bad}} {
		if code, _, err := httpsGet(base, "/readyz", &tls.Config{RootCAs: serverCA.pool(), Certificates: certs}); err == nil {
			t.Errorf("HTTPS with %s: %d, want a failed handshake", what, code)
		}
		if err := exportGRPC(t, ts.srv.GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(
			credentials.NewTLS(&tls.Config{RootCAs: serverCA.pool(), Certificates: certs}))}); err == nil {
			t.Errorf("gRPC with %s accepted", what)
		}
	}
	if err := exportGRPC(t, ts.srv.GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: serverCA.pool(), Certificates: []tls.Certificate{good}}))}); err != nil {
		t.Fatalf("gRPC with a client certificate of the client CA: %v", err)
	}
}

// TestRefusesNonLoopbackWithoutTokens: a non-loopback address without an
// auth file is refused, saying why and what to do, unless Insecure.
func TestRefusesNonLoopbackWithoutTokens(t *testing.T) {
	for _, o := range []Options{
		{HTTPAddr: "0.0.0.0:0"},
		{HTTPAddr: ":4318"},
		{HTTPAddr: "127.0.0.1:0", GRPCAddr: "[::]:0"},
		{HTTPAddr: "127.0.0.1:0", ExtraHTTPAddrs: []string{"example.com:3200"}},
	} {
		_, err := New(o)
		if err == nil {
			t.Errorf("%+v: started without tokens on a non-loopback address", o)
			continue
		}
		for _, want := range []string{"not a loopback address", "--auth-file", "--insecure"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: the message lacks %q", err, want)
			}
		}
		o.Insecure = true
		if _, err := New(o); err != nil {
			t.Errorf("%+v with Insecure: %v", o, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.1.2.3:0"} {
		if _, err := New(Options{HTTPAddr: addr, GRPCAddr: addr}); err != nil {
			t.Errorf("loopback %s refused: %v", addr, err)
		}
	}
	auth := writeAuthFile(t, filepath.Join(t.TempDir(), "auth.json"), tokReadA)
	if _, err := New(Options{HTTPAddr: "0.0.0.0:0", AuthFile: auth}); err != nil {
		t.Errorf("0.0.0.0 with an auth file: %v", err)
	}
}

// TestSDKExportersWithTokenFromEnvironment: the OpenTelemetry SDK's OTLP
// exporters, configured only by the environment variables docs/security.md
// gives (OTEL_EXPORTER_OTLP_HEADERS with a URL-encoded "Bearer%20TOKEN",
// OTEL_EXPORTER_OTLP_CERTIFICATE for a private CA), reach a server with an
// auth file and TLS over HTTP and gRPC.
func TestSDKExportersWithTokenFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	c, k := ca.issue(t, 1, false)
	writeFiles(t, dir, map[string][]byte{"cert.pem": c, "key.pem": k, "ca.pem": ca.pem})
	ts := startAuthServer(t, Options{TLSCert: filepath.Join(dir, "cert.pem"), TLSKey: filepath.Join(dir, "key.pem")})
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20"+tokMulti.secret+",X-Scope-OrgID=b")
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "ca.pem"))
	ctx := context.Background()
	for _, proto := range []string{"http", "grpc"} {
		var exp sdktrace.SpanExporter
		var err error
		if proto == "http" {
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(ts.srv.HTTPAddr()))
		} else {
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(ts.srv.GRPCAddr()))
		}
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		_, span := tp.Tracer("auth-test").Start(ctx, "op-"+proto)
		span.End()
		if err := tp.ForceFlush(ctx); err != nil {
			t.Fatalf("%s: export: %v", proto, err)
		}
		tp.Shutdown(ctx)
		// The span is in project b, read back over TLS with b's read token.
		req, _ := http.NewRequest("GET", "https://"+ts.srv.HTTPAddr()+"/api/v1/traces/"+span.SpanContext().TraceID().String(), nil)
		req.Header.Set("Authorization", bearerHdr(tokReadB))
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: the exported span is not in project b: %s", proto, resp.Status)
		}
	}
}
