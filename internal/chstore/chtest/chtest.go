// Package chtest runs a real clickhouse-server for tests (package chserver):
// a test binary shares one server (Shared); each test gets a database of its
// own (URL) that is dropped when the test ends. The server stops when the
// test binary exits, however it exits. No test is skipped when the server is
// missing: Shared fails the test and says how to install it.
package chtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chserver"
)

// Server is one clickhouse-server child process.
type Server = chserver.Server

// ErrNotInstalled: clickhouse-server is not installed.
var ErrNotInstalled = chserver.ErrNotInstalled

// Start starts a server of the test's own (Shared is the binary's).
func Start() (*Server, error) { return chserver.Start() }

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test binary's server, starting it on first use; it
// stops when the binary exits. A missing server fails t (never skips it).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Start() })
	if shared.err != nil {
		t.Fatalf("ClickHouse tests need a real server: %v", shared.err)
	}
	return shared.srv
}

var dbs atomic.Int64

// URL creates a fresh database on the shared server and returns its DSN;
// it is dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("rastro_test_%d_%d", os.Getpid(), dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Dropping a large database while merges run can take a while on a
		// busy host.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return s.URL(name)
}
