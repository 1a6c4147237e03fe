// Package chcluster runs a real ClickHouse cluster for tests: one ZooKeeper
// (Debian's zookeeper package, run with java) and clickhouse-server
// processes (package chserver) configured as one cluster of shards of
// replicas, all on free loopback ports, with data directories under the
// system's temporary directory that are removed when they stop. A test
// binary shares one cluster of 2 shards of 1 replica (Shared) and, for the
// tests of replication only, one of 1 shard of 2 replicas (SharedReplicas);
// a test that needs another shape starts its own (StartFor). Every process
// is started under a small shell that stops it when a pipe from this
// process closes, so it stops however the test binary exits. Nothing waits blindly: start-up
// waits for ZooKeeper to say it serves, each server to answer SELECT 1 and
// to read system.zookeeper.
//
// No test is skipped when java or ZooKeeper is missing: Shared fails the
// test and says what to install.
package chcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rastro-dev/rastro/internal/chstore/chserver"
)

// Name is the cluster's name in remote_servers (ON CLUSTER Name).
const Name = "rastro_test"

// ZooKeeperJar is Debian's ZooKeeper server jar (its manifest names the
// jars it needs).
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// slf4jSimple makes ZooKeeper log to its standard error (its server.log);
// without it ZooKeeper logs nothing.
const slf4jSimple = "/usr/share/java/slf4j-simple.jar"

// ErrNoZooKeeper: java or ZooKeeper is not installed.
var ErrNoZooKeeper = errors.New("a ClickHouse cluster needs ZooKeeper: run .ci/run, or apt-get install zookeeper (it brings java)")

// Cluster is a ZooKeeper and the servers of one ClickHouse cluster.
type Cluster struct {
	Name string
	// Nodes are the servers, shard by shard: node i is replica
	// i%Replicas+1 of shard i/Replicas+1 (macros shard, and replica
	// node{i+1}: unique in the cluster, as the tables replicated to every
	// node need).
	Nodes    []*chserver.Server
	Shards   int
	Replicas int
	ZKPort   int
	own      bool // started by StartFor: its databases go with it
	zk       *process
	zkDir    string
}

// process is a child started under the stop-on-pipe-close shell.
type process struct {
	cmd    *exec.Cmd
	stop   *os.File
	exited bool
}

func (p *process) reaped() bool {
	if !p.exited {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(p.cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
		p.exited = pid == p.cmd.Process.Pid || err != nil
	}
	return p.exited
}

// wrapper runs "$@" in the background and stops it when its standard input
// reaches end of file, then removes the directory $1.
const wrapper = `dir="$1"; shift
"$@" >>"$dir/server.log" 2>&1 &
ch=$!
cat >/dev/null
kill $ch 2>/dev/null
wait $ch
rm -rf "$dir"`

func startProcess(dir string, args ...string) (*process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", wrapper, "sh", dir}, args...)...)
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	r.Close()
	return &process{cmd: cmd, stop: w}, nil
}

// halt closes the pipe and waits up to 30 s for the child to stop.
func (p *process) halt(what string) error {
	p.stop.Close()
	for deadline := time.Now().Add(30 * time.Second); !p.reaped(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not stop within 30s", what)
		}
	}
	return nil
}

const zooCfg = `tickTime=500
initLimit=10
syncLimit=5
dataDir=%s/data
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
maxClientCnxns=0
`

// startZooKeeper starts a standalone ZooKeeper and waits until it answers
// that it serves (up to 60 s).
func startZooKeeper() (*process, int, string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, 0, "", fmt.Errorf("%w (no java on PATH)", ErrNoZooKeeper)
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return nil, 0, "", fmt.Errorf("%w (no %s)", ErrNoZooKeeper, ZooKeeperJar)
	}
	port, err := chserver.FreePort()
	if err != nil {
		return nil, 0, "", err
	}
	dir, err := os.MkdirTemp("", "rastro-zookeeper-")
	if err != nil {
		return nil, 0, "", err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err == nil {
		err = os.WriteFile(cfg, fmt.Appendf(nil, zooCfg, dir, port), 0o644)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, "", err
	}
	p, err := startProcess(dir, java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", ZooKeeperJar+":"+slf4jSimple,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, "", err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := serving(port)
		if err == nil {
			return p, port, dir, nil
		}
		if p.reaped() || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			p.halt("zookeeper")
			return nil, 0, "", fmt.Errorf("zookeeper on port %d did not answer (%v): %s", port, err, tail(log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serving asks ZooKeeper whether it serves requests: "srvr" answers its
// mode once it does ("ruok" answers "imok" before, while sessions are still
// refused; clickhouse-server 18.16 can crash when its first session is).
func serving(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return err
	}
	b, _ := io.ReadAll(c)
	if !bytes.Contains(b, []byte("Mode: standalone")) {
		return fmt.Errorf("srvr answered %q", b)
	}
	return nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// nodeXML is the cluster part of node i's configuration; ports are every
// node's, replicas per shard.
func nodeXML(name string, zkPort, interserver int, ports []int, replicas, i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<interserver_http_port>%d</interserver_http_port>\n<interserver_http_host>127.0.0.1</interserver_http_host>\n", interserver)
	fmt.Fprintf(&b, "<remote_servers><%s>\n", name)
	for first := 0; first < len(ports); first += replicas {
		// internal_replication: the Distributed table writes each row to
		// one replica of its shard, and the replicated local tables copy
		// it to the others (false would write every replica itself).
		b.WriteString("<shard><internal_replication>true</internal_replication>")
		for _, p := range ports[first : first+replicas] {
			fmt.Fprintf(&b, "<replica><host>127.0.0.1</host><port>%d</port></replica>", p)
		}
		b.WriteString("</shard>\n")
	}
	fmt.Fprintf(&b, "</%s></remote_servers>\n", name)
	fmt.Fprintf(&b, "<zookeeper><node><host>127.0.0.1</host><port>%d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>\n", zkPort)
	fmt.Fprintf(&b, "<macros><shard>%d</shard><replica>node%d</replica></macros>\n", i/replicas+1, i+1)
	b.WriteString("<distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>\n")
	return b.String()
}

// Start starts a ZooKeeper and a cluster of shards x replicas servers and
// waits until every server reads ZooKeeper.
func Start(shards, replicas int) (*Cluster, error) {
	if shards < 1 || replicas < 1 {
		return nil, fmt.Errorf("a cluster of %d shards of %d replicas", shards, replicas)
	}
	zk, zkPort, zkDir, err := startZooKeeper()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: Name, Shards: shards, Replicas: replicas, ZKPort: zkPort, zk: zk, zkDir: zkDir}
	ports := make([]int, shards*replicas)
	for i := range ports {
		if ports[i], err = chserver.FreePort(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for i, port := range ports {
		inter, err := chserver.FreePort()
		if err != nil {
			c.Stop()
			return nil, err
		}
		s, err := chserver.StartConfig(chserver.Config{Port: port, ExtraXML: nodeXML(Name, zkPort, inter, ports, replicas, i)})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range c.Nodes {
		if err := c.WaitZooKeeper(ctx, i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// WaitZooKeeper waits until node i reads ZooKeeper (after Start, or after
// its server's Up).
func (c *Cluster) WaitZooKeeper(ctx context.Context, i int) error {
	for {
		_, err := c.Nodes[i].QueryUint(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'")
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("node %d does not read ZooKeeper: %w", i+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL is the DSN of database db on node i.
func (c *Cluster) URL(i int, db string) string { return c.Nodes[i].URL(db) }

// Stop stops the servers (all at once) and ZooKeeper and removes their
// directories.
func (c *Cluster) Stop() error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, s := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Stop()
		}()
	}
	wg.Wait()
	if c.zk != nil {
		errs = append(errs, c.zk.halt("zookeeper"))
	}
	return errors.Join(errs...)
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

var sharedReplicas struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the test binary's cluster of 2 shards of 1 replica,
// starting it on first use; it stops when the binary exits. A missing
// java, ZooKeeper or clickhouse-server fails t (never skips it).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.err = Start(2, 1) })
	if shared.err != nil {
		t.Fatalf("ClickHouse cluster tests need a real cluster: %v", shared.err)
	}
	return shared.c
}

// SharedReplicas returns the test binary's cluster of 1 shard of 2
// replicas (its own ZooKeeper and two more servers), starting it on first
// use, as Shared does: only the tests of replication start it.
func SharedReplicas(t testing.TB) *Cluster {
	t.Helper()
	sharedReplicas.once.Do(func() { sharedReplicas.c, sharedReplicas.err = Start(1, 2) })
	if sharedReplicas.err != nil {
		t.Fatalf("ClickHouse replication tests need a real cluster: %v", sharedReplicas.err)
	}
	return sharedReplicas.c
}

// StartFor starts a cluster of shards x replicas for t alone (Start) and
// stops it when t ends: for a shape only one test needs (each server is a
// process; the shared clusters stay small). A failure to start fails t.
func StartFor(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	c, err := Start(shards, replicas)
	if err != nil {
		t.Fatalf("a ClickHouse cluster of %d shards of %d replicas: %v", shards, replicas, err)
	}
	c.own = true
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	return c
}

var dbs atomic.Int64

// Database creates a fresh database ON CLUSTER and returns its name; it is
// dropped ON CLUSTER when t ends (on a cluster of StartFor, it goes with
// the cluster's directories instead).
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("rastro_ctest_%d_%d", os.Getpid(), dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Nodes[0].Exec(ctx, "CREATE DATABASE "+name+" ON CLUSTER "+c.Name); err != nil {
		t.Fatalf("create database %s on cluster: %v\n%s", name, err, c.Logs())
	}
	if c.own {
		return name
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Nodes[0].Exec(ctx, "DROP DATABASE IF EXISTS "+name+" ON CLUSTER "+c.Name); err != nil {
			t.Errorf("drop database %s on cluster: %v", name, err)
		}
	})
	return name
}

// Logs are the ends of the servers' and ZooKeeper's logs (for a failure's
// message).
func (c *Cluster) Logs() string {
	var b strings.Builder
	for i, s := range c.Nodes {
		fmt.Fprintf(&b, "log of node %d:\n%s\n", i+1, s.LogTail())
	}
	log, _ := os.ReadFile(filepath.Join(c.zkDir, "server.log"))
	fmt.Fprintf(&b, "log of zookeeper:\n%s\n", tail(log))
	return b.String()
}
