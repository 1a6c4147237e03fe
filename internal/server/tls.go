package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// serverTLS holds the TLS settings of the HTTP and gRPC listeners, loaded
// from files and swapped whole on reload: a handshake uses the settings in
// force when it starts, and connections already open keep theirs.
type serverTLS struct {
	certFile, keyFile, clientCAFile string
	current                         atomic.Pointer[tls.Config]
}

// newServerTLS loads the certificate, key and optional client CA bundle.
func newServerTLS(certFile, keyFile, clientCAFile string) (*serverTLS, error) {
	t := &serverTLS{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the files again; on error the settings in use stay.
func (t *serverTLS) reload() error {
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load certificate %s and key %s: %w", t.certFile, t.keyFile, err)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		// h2 for gRPC and HTTP/2, http/1.1 for everything else.
		NextProtos: []string{"h2", "http/1.1"},
	}
	if t.clientCAFile != "" {
		pem, err := os.ReadFile(t.clientCAFile)
		if err != nil {
			return fmt.Errorf("tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: client CA %s holds no PEM certificate", t.clientCAFile)
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	t.current.Store(c)
	return nil
}

// config is the listeners' TLS configuration: each handshake takes the
// settings loaded last.
func (t *serverTLS) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.current.Load(), nil
		},
	}
}

// ReloadTLS reads the certificate, key and client CA files again (for the
// next handshakes). On error the settings in use stay. Without TLS it does
// nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	if err := s.tls.reload(); err != nil {
		return err
	}
	s.log.Info("tls certificate loaded", "cert", s.opts.TLSCert, "client_ca", s.opts.TLSClientCA)
	return nil
}

// Reload reloads the auth file and the TLS files (rastro serve calls it on
// SIGHUP). Each keeps its settings in use when its files do not load; the
// errors are joined.
func (s *Server) Reload() error {
	return errors.Join(s.ReloadAuth(), s.ReloadTLS())
}
