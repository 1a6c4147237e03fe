// Package chserver runs a real clickhouse-server as a child process: on a
// free loopback port, with a generated configuration and a data directory
// under the system's temporary directory, both removed when it stops. The
// tests (packages chtest and chcluster, whose servers get a cluster's
// configuration through Config) and the benchmark harness (rastro bench
// clickhouse) use it. The child is started under a small shell that waits on
// a pipe from this process and stops clickhouse-server (and removes its
// directory) when the pipe closes, so it stops however this process exits.
package chserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Binary is the server executable looked up on PATH (and in /usr/sbin,
// where Debian's package installs it).
const Binary = "clickhouse-server"

// ErrNotInstalled: clickhouse-server is not installed.
var ErrNotInstalled = errors.New("clickhouse-server is not installed: run .ci/run, or apt-get install clickhouse-server")

// Server is one clickhouse-server child process.
type Server struct {
	Port    int    // native protocol port on 127.0.0.1
	Version string // SELECT version()
	dir     string
	bin     string
	cmd     *exec.Cmd
	stop    *os.File // write end of the pipe the wrapper shell waits on
	exited  bool     // the wrapper shell has been reaped
}

// find locates the server binary.
func find() (string, error) {
	if p, err := exec.LookPath(Binary); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/" + Binary, "/usr/bin/" + Binary} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

const configXML = `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>%d</tcp_port>
  <path>%[2]s/data/</path>
  <tmp_path>%[2]s/data/tmp/</tmp_path>
  <user_files_path>%[2]s/data/user_files/</user_files_path>
  <format_schema_path>%[2]s/data/format_schemas/</format_schema_path>
  <users_config>%[2]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <mlock_executable>false</mlock_executable>
%[3]s
</yandex>
`

const usersXML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`

// wrapper starts the server in the background and stops it when its
// standard input reaches end of file (the test process closed the pipe or
// exited), then removes the directory, unless a file "keep" in it says the
// server is being restarted.
const wrapper = `"$1" --config-file="$2/config.xml" >>"$2/server.log" 2>&1 &
ch=$!
cat >/dev/null
kill $ch 2>/dev/null
wait $ch
[ -e "$2/keep" ] || rm -rf "$2"`

// Config is what a server is started with beyond the defaults.
type Config struct {
	// Port is the native protocol port; 0 picks a free one.
	Port int
	// ExtraXML is added to the server's configuration as is (a cluster's
	// remote_servers, zookeeper and macros sections: package chcluster).
	ExtraXML string
}

// FreePort asks the kernel for a free loopback port (for a Config that must
// name its ports before its servers start).
func FreePort() (int, error) { return freePort() }

// Start starts a server and waits until it answers (up to 60 s).
func Start() (*Server, error) { return StartConfig(Config{}) }

// StartConfig starts a server configured by c and waits until it answers
// (up to 60 s).
func StartConfig(c Config) (*Server, error) {
	bin, err := find()
	if err != nil {
		return nil, err
	}
	port := c.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "rastro-clickhouse-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), fmt.Appendf(nil, configXML, port, dir, c.ExtraXML), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(usersXML), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Port: port, dir: dir, bin: bin}
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the server process on s's directory and port and waits
// until it answers (up to 60 s).
func (s *Server) launch() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", wrapper, "sh", s.bin, s.dir)
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	r.Close()
	// No goroutine waits on the child (packages under goleak share this
	// server): it is reaped by polling (reaped).
	s.cmd, s.stop, s.exited = cmd, w, false
	dir, port := s.dir, s.Port
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := s.version()
		if err == nil {
			s.Version = v
			return nil
		}
		if s.reaped() {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("clickhouse-server exited at start: %s", tail(log))
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			s.Stop()
			return fmt.Errorf("clickhouse-server on port %d did not answer within 60s (%v): %s", port, err, tail(log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Addr is the native protocol address.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// URL is the DSN of database db.
func (s *Server) URL(db string) string { return fmt.Sprintf("clickhouse://%s/%s", s.Addr(), db) }

// Exec runs one statement in the default database.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Exec(ctx, sql)
}

func (s *Server) version() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: time.Second})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var v string
	err = conn.QueryRow(ctx, "SELECT version()").Scan(&v)
	return v, err
}

// QueryUint runs a query of one unsigned number (a count) in the default
// database.
func (s *Server) QueryUint(ctx context.Context, sql string) (uint64, error) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: 2 * time.Second})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var n uint64
	err = conn.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// OptimizeAll merges the parts of every MergeTree table of database db
// into one per partition (OPTIMIZE TABLE ... FINAL), as background merges
// do over time, so that its directory's size is what it settles at.
func (s *Server) OptimizeAll(ctx context.Context, db string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ? AND engine LIKE '%MergeTree'", db)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+db+"."+t+" FINAL"); err != nil {
			return fmt.Errorf("optimize %s.%s: %w", db, t, err)
		}
	}
	return nil
}

// CreateDatabase creates a database named name.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return s.Exec(ctx, "CREATE DATABASE "+name)
}

// reaped reports whether the wrapper shell has exited (and reaps it).
func (s *Server) reaped() bool {
	if !s.exited {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(s.cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
		s.exited = pid == s.cmd.Process.Pid || err != nil
	}
	return s.exited
}

// Restart stops the server process, keeping its data, and starts it again
// on the same port; it returns once the server answers again.
func (s *Server) Restart() error {
	if err := s.Down(); err != nil {
		return err
	}
	return s.Up()
}

// Down stops the server process and keeps its data, for Up to start it
// again (a node of a cluster that is down for a while).
func (s *Server) Down() error {
	keep := filepath.Join(s.dir, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		return err
	}
	if err := s.Stop(); err != nil {
		return err
	}
	return os.Remove(keep)
}

// Up starts a server stopped by Down on its data and port; it returns once
// the server answers again.
func (s *Server) Up() error { return s.launch() }

// Stop stops the server and removes its directory; it waits up to 30 s.
func (s *Server) Stop() error {
	s.stop.Close()
	for deadline := time.Now().Add(30 * time.Second); !s.reaped(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("clickhouse-server on port %d did not stop within 30s (directory %s)", s.Port, s.dir)
		}
	}
	return nil
}

// LogTail is the end of the server's log (for a failure's message).
func (s *Server) LogTail() string {
	log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return tail(log)
}

// CPU is the processor time (user and system, every thread: inserts,
// views and background merges) the clickhouse-server process has used
// since it started, read from /proc (Linux only).
func (s *Server) CPU() (time.Duration, error) {
	sh := s.cmd.Process.Pid
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sh, sh))
	if err != nil {
		return 0, fmt.Errorf("find clickhouse-server under its wrapper shell %d: %w", sh, err)
	}
	f := strings.Fields(string(kids))
	if len(f) == 0 {
		return 0, fmt.Errorf("clickhouse-server on port %d: no process under its wrapper shell %d", s.Port, sh)
	}
	return ProcessCPU(f[0])
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// ProcessCPU is the user and system time process pid ("self" for this
// one) has used, from /proc/PID/stat.
func ProcessCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name (in parentheses, which may hold spaces).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime (fields 14 and 15)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
