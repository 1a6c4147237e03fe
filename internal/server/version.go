package server

import (
	"runtime/debug"
	"sync"
)

// Version is this binary's version: the module version it was built at
// (a tagged release), or "devel" with the VCS revision for a build from a
// working tree ("devel 5c5a26a", "+dirty" when it had changes), and the Go
// version. It is read once from the build information.
var Version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 7 {
			rev = rev[:7]
		}
		if rev != "" {
			v += " " + rev + dirty
		}
	}
	return v + " (" + bi.GoVersion + ")"
})
