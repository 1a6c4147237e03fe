// Package valuestore stores large attribute values (prompts, completions) once,
// content-addressed by SHA-256, in append-only pack files, so that segments
// can reference them by hash and read them only when a result includes them.
// Consecutive Puts are gathered into frames of about 4 KiB
// (Options.FrameBytes), zstd-compressed together: short messages that share
// vocabulary compress far better together than alone. A Get decompresses its
// value's frame; Collect and Purge rewrite a frame without its dead values.
//
// Usage:
//
//	s, err := valuestore.Open(valuestore.Options{Dir: dir})
//	ref, fresh, err := s.Put(prompt) // fresh is false when the value was already stored
//	err = s.Sync()                    // before publishing a segment that references ref
//	v, err := s.Get(ref)              // read from disk, checked, decompressed, SHA-256 verified
//	st, err := s.Collect(func(yield func(valuestore.Ref) bool) { /* every ref of every published segment */ })
//
// Only an index of 28-byte locations per distinct value is resident (about
// 85-90 bytes per value with the map's overhead) and the frame being gathered;
// values are never cached.
//
// # Collect contract
//
// Collect deletes every value that live does not yield, except values Put (or
// Put again) while Collect runs. A value Put earlier whose referencing segment
// is not yet published when Collect starts is deleted unless live yields it:
// the caller must serialise Collect with segment publication (or include the
// refs of segments in flight). Collect copies live values out of mostly-dead
// packs and publishes the result through the manifest before deleting the old
// packs, so a crash at any step never loses a live value.
//
// # Concurrency
//
// Put, Get, Has, Sync, Stats and Collect may be called concurrently. Store.wmu
// serialises appends, pack rotation and manifest publication and is held during
// that I/O; Store.mu guards the resident index and is never held during I/O, so
// Get and Has never wait for a write. Collects run one at a time and copy
// records with no lock held. The package starts no goroutines.
//
// The on-disk format is specified in docs/format/values.md.
package valuestore
