// Package durable holds what every on-disk structure of Rastro shares: the two
// file-system calls it relies on to survive a crash (syncing a file's data,
// and syncing a directory so that creations, renames and removals in it
// persist), and the marker of corruption, ErrCorruption.
package durable

import (
	"fmt"
	"os"
)

// SyncDir fsyncs a directory so that file creations, renames and removals
// in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
