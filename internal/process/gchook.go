package process

import (
	"runtime"
	"sync/atomic"
)

// AfterEachGC calls fn after every garbage collection, on the runtime's
// finalizer goroutine, until stop is called: fn must be quick and must not
// wait for anything that waits for a collection. It uses the finalizer of an
// object nothing references, which runs once a collection has found it
// garbage, and arms a new one each time. A call to fn already under way
// when stop returns may still finish.
func AfterEachGC(fn func()) (stop func()) {
	var stopped atomic.Bool
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new([16]byte), func(*[16]byte) {
			if stopped.Load() {
				return
			}
			fn()
			arm()
		})
	}
	arm()
	return func() { stopped.Store(true) }
}
