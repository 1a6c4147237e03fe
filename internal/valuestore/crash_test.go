package valuestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// crashModel tracks what a crash may and may not lose.
type crashModel struct {
	vals     [][]byte
	put      map[int]bool // Put returned success
	required map[int]bool // Put then Sync (or Close) succeeded, and no Collect has excluded it since
}

// crashWorkload drives a store through Puts, Syncs, rotations and Collects
// until an operation fails. It returns the model of what must survive.
func crashWorkload(fs *memFS) (*crashModel, error) {
	m := &crashModel{put: map[int]bool{}, required: map[int]bool{}}
	for i := range 40 {
		switch {
		case i%7 == 3:
			m.vals = append(m.vals, randomBytes(uint64(i), 300+i*10))
		default:
			m.vals = append(m.vals, text(uint64(i), 200+i*37))
		}
	}
	s, err := Open(Options{Dir: "/vs", PackBytes: 2048, FS: fs})
	if err != nil {
		return m, err
	}
	defer s.Close()
	put := func(ids ...int) error {
		for _, id := range ids {
			if _, _, err := s.Put(m.vals[id]); err != nil {
				return err
			}
			m.put[id] = true
		}
		return nil
	}
	sync := func() error {
		if err := s.Sync(); err != nil {
			return err
		}
		for id := range m.put {
			m.required[id] = true
		}
		return nil
	}
	collect := func(live ...int) error {
		set := map[int]bool{}
		for _, id := range live {
			set[id] = true
		}
		for id := range m.required {
			if !set[id] {
				delete(m.required, id) // may be deleted from now on
			}
		}
		for id := range m.put {
			if !set[id] {
				delete(m.put, id)
			}
		}
		_, err := s.Collect(func(yield func(Ref) bool) {
			for _, id := range live {
				if !yield(RefOf(m.vals[id])) {
					return
				}
			}
		})
		return err
	}
	steps := []func() error{
		func() error { return put(0, 1, 2, 3, 4, 5, 6, 7, 8, 9) },
		sync,
		func() error { return put(10, 11, 3, 12, 13, 14, 15, 16, 17, 18, 19) },
		sync,
		func() error { return collect(0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19) },
		func() error { return put(20, 21, 22, 23, 24, 25, 5, 26, 27, 28, 29) },
		sync,
		func() error { return collect(10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 5) },
		func() error { return put(30, 31, 32, 33, 34) },
		sync,
		func() error { return collect(5, 20, 21, 30, 31, 32, 33, 34) },
		func() error { return put(35, 36, 0) },
		func() error {
			if err := s.Close(); err != nil {
				return err
			}
			for id := range m.put {
				m.required[id] = true
			}
			return nil
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return m, fmt.Errorf("step %d: %w", i, err)
		}
	}
	return m, nil
}

// TestCrashAtEveryStep stops the store after each mutating file operation in
// turn, then reopens from several images of what a crash leaves: only synced
// data and directory entries; unsynced directory operations kept; torn
// unsynced tails kept; and the process's view (a failed write without a
// machine crash). Every value acknowledged by Sync (and not excluded by a
// Collect's live set) must read back intact, no damage may be reported, and
// the reopened store must accept and persist new values.
func TestCrashAtEveryStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	completed := false
	for n := 0; n < 5000 && !completed; n++ {
		fs := newMemFS()
		fs.limit = n
		m, err := crashWorkload(fs)
		if err == nil {
			completed = true
		} else if !errors.Is(err, errInjected) {
			t.Fatalf("crash after %d ops: workload failed with a non-injected error: %v", n, err)
		}
		images := map[string]*memFS{
			"synced":       fs.crashImage(false, false, rng),
			"dir-ops-kept": fs.crashImage(true, false, rng),
			"torn-tail":    fs.crashImage(false, true, rng),
			"torn-dir":     fs.crashImage(true, true, rng),
			"process-view": fs.running(),
		}
		for _, name := range []string{"synced", "dir-ops-kept", "torn-tail", "torn-dir", "process-view"} {
			checkRecovered(t, fmt.Sprintf("crash after %d ops, %s", n, name), images[name], m)
		}
	}
	if !completed {
		t.Fatal("workload never completed")
	}
}

func checkRecovered(t *testing.T, what string, fs *memFS, m *crashModel) {
	t.Helper()
	s, err := Open(Options{Dir: "/vs", PackBytes: 2048, FS: fs})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	if c := s.Corruptions(); len(c) != 0 {
		t.Fatalf("%s: a crash was reported as damage: %v", what, c)
	}
	ids := make([]int, 0, len(m.required))
	for id := range m.required {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		got, err := s.Get(RefOf(m.vals[id]))
		if err != nil {
			t.Fatalf("%s: acknowledged value %d lost: %v", what, id, err)
		}
		if string(got) != string(m.vals[id]) {
			t.Fatalf("%s: value %d reads back different bytes", what, id)
		}
	}
	extra := text(1000, 3000)
	if _, _, err := s.Put(extra); err != nil {
		t.Fatalf("%s: put after recovery: %v", what, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close after recovery: %v", what, err)
	}
	s, err = Open(Options{Dir: "/vs", PackBytes: 2048, FS: fs})
	if err != nil {
		t.Fatalf("%s: second reopen: %v", what, err)
	}
	defer s.Close()
	if c := s.Corruptions(); len(c) != 0 {
		t.Fatalf("%s: second reopen reported %v", what, c)
	}
	for _, id := range append(ids, -1) {
		v := extra
		if id >= 0 {
			v = m.vals[id]
		}
		if _, err := s.Get(RefOf(v)); err != nil {
			t.Fatalf("%s: after second reopen, value %d: %v", what, id, err)
		}
	}
}
