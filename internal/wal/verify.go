package wal

import (
	"bufio"
	"errors"
	"github.com/rastro-dev/rastro/internal/vfs"
	"io/fs"
)

// VerifyReport is what VerifyDir found in a WAL directory.
type VerifyReport struct {
	Files   int   // log files read
	Records int   // intact records
	Bytes   int64 // bytes of the intact records, headers included
	// Corruptions lists damage: a damaged record, header or file that replay
	// skips (the records after it in the same file are kept).
	Corruptions []*CorruptionError
	// TornTail, when set, is damage at the end of the last file that no
	// intact record follows: what a crash during an append leaves. It is not
	// a problem; replay truncates it.
	TornTail *CorruptionError
}

// VerifyDir reads every log file of dir, as Replay does (checksums, lengths,
// file headers, resynchronisation after damage), without opening a WAL and
// without modifying anything: where Replay would truncate a torn tail of the
// last file, VerifyDir reports it in TornTail. A missing directory holds
// nothing. The error is for I/O failures and unknown format versions.
func VerifyDir(dir string) (*VerifyReport, error) {
	return VerifyDirFS(nil, dir)
}

// VerifyDirFS is VerifyDir on a filesystem (nil: the operating system's).
func VerifyDirFS(fsys vfs.FS, dir string) (*VerifyReport, error) {
	fsys = vfs.Or(fsys)
	rep := &VerifyReport{}
	files, err := listFiles(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	var st ReplayStats
	w := &WAL{opts: Options{Dir: dir, FS: fsys, Logf: func(string, ...any) {}}}
	rd := &replayer{w: w, fn: func(Record) error { return nil }, st: &st, br: bufio.NewReaderSize(nil, 1<<16)}
	for i, lf := range files {
		before := len(st.Corruptions)
		// last=false: replay skips what follows damage instead of truncating.
		if err := rd.file(lf.seq, false); err != nil {
			return nil, err
		}
		if i == len(files)-1 && len(st.Corruptions) > before {
			c := st.Corruptions[len(st.Corruptions)-1]
			if c.Offset >= fileHeaderSize && c.Offset+c.Skipped == lf.size {
				rep.TornTail = c
				st.Corruptions = st.Corruptions[:len(st.Corruptions)-1]
			}
		}
	}
	rep.Files, rep.Records, rep.Bytes, rep.Corruptions = st.Files, st.Records, st.Bytes, st.Corruptions
	return rep, nil
}
