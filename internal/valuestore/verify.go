package valuestore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// DirVerification is what VerifyDir found in a value store directory.
type DirVerification struct {
	Dir string
	// Problems lists damage: each names the file, the offset of the damaged
	// part and what is wrong.
	Problems []*CorruptionError
	// Notes lists states that are not damage but that Open changes: a torn
	// tail it cuts, unpublished packs and temporary files it removes.
	Notes []string
	// Packs is the number of pack files checked; Values the distinct values
	// read back intact (checksums, decompression and SHA-256); Bytes the
	// size of the packs checked.
	Packs  int
	Values int
	Bytes  int64

	intact map[Ref]struct{}
}

// Clean reports whether no problem was found.
func (v *DirVerification) Clean() bool { return len(v.Problems) == 0 }

// Has reports whether ref is stored and was read back intact.
func (v *DirVerification) Has(ref Ref) bool {
	_, ok := v.intact[ref]
	return ok
}

// Refs returns every value read back intact, in ascending byte order.
func (v *DirVerification) Refs() []Ref {
	out := make([]Ref, 0, len(v.intact))
	for r := range v.intact {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Ref) int { return slices.Compare(a[:], b[:]) })
	return out
}

// VerifyDir checks a value store directory without opening a Store and
// without modifying anything (Open would cut torn tails, remove unpublished
// packs and republish a damaged manifest; VerifyDir only reports them). It
// checks the manifest, every pack header, every pack index, and reads every
// record of every pack: header and body checksums, decompression and the
// SHA-256 of the value. A missing directory is an empty store. The error is
// for I/O failures and unknown format versions only.
func VerifyDir(dir string) (*DirVerification, error) {
	v := &DirVerification{Dir: dir, intact: map[Ref]struct{}{}}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list value store dir %s: %w", dir, err)
	}
	problem := func(name string, off int64, format string, args ...any) {
		v.Problems = append(v.Problems, &CorruptionError{File: filepath.Join(dir, name), Offset: off, Msg: fmt.Sprintf(format, args...)})
	}
	diskPacks, diskIdx := map[uint32]bool{}, map[uint32]bool{}
	haveManifest := false
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if seq, ok := parseSeqName(n, packSuffix); ok {
			diskPacks[seq] = true
		} else if seq, ok := parseSeqName(n, idxSuffix); ok {
			diskIdx[seq] = true
		} else if n == manifestName {
			haveManifest = true
		} else if filepath.Ext(n) == tmpSuffix {
			v.Notes = append(v.Notes, fmt.Sprintf("%s: temporary file of an interrupted publication (removed on next open)", filepath.Join(dir, n)))
		} else {
			v.Notes = append(v.Notes, fmt.Sprintf("%s: unknown file, not checked", filepath.Join(dir, n)))
		}
	}

	var check []uint32
	listedOK := false
	switch {
	case !haveManifest && len(diskPacks) == 0:
	case !haveManifest:
		problem(manifestName, 0, "manifest missing while %d pack files exist (open adopts them)", len(diskPacks))
	default:
		b, err := os.ReadFile(filepath.Join(dir, manifestName))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, manifestName), err)
		}
		m, off, err := decodeManifest(b)
		switch {
		case errors.Is(err, errVersion):
			return nil, fmt.Errorf("%s: %w: %v", filepath.Join(dir, manifestName), ErrUnsupportedVersion, err)
		case err != nil:
			problem(manifestName, off, "%v (open adopts every pack file)", err)
		default:
			listedOK = true
			check = m.packs
		}
	}
	if listedOK {
		listed := map[uint32]bool{}
		for _, seq := range check {
			listed[seq] = true
		}
		kept := check[:0:0]
		for _, seq := range check {
			if !diskPacks[seq] {
				problem(packName(seq), 0, "pack listed in the manifest is missing; its values are lost")
				continue
			}
			kept = append(kept, seq)
		}
		check = kept
		for seq := range diskPacks {
			if !listed[seq] {
				v.Notes = append(v.Notes, fmt.Sprintf("%s: pack not in the manifest (never published, or retired; removed on next open)",
					filepath.Join(dir, packName(seq))))
			}
		}
	} else {
		for seq := range diskPacks {
			check = append(check, seq)
		}
	}
	sort.Slice(check, func(i, j int) bool { return check[i] < check[j] })
	for _, seq := range check {
		if err := v.pack(seq, diskIdx[seq], problem); err != nil {
			return nil, err
		}
	}
	v.Values = len(v.intact)
	sort.Strings(v.Notes)
	return v, nil
}

// pack verifies one pack file and its index.
func (v *DirVerification) pack(seq uint32, hasIdx bool, problem func(string, int64, string, ...any)) error {
	name := packName(seq)
	path := filepath.Join(v.Dir, name)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open pack %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat pack %s: %w", path, err)
	}
	size := st.Size()
	v.Packs++
	v.Bytes += size
	hdr := make([]byte, min(size, packHeaderSize))
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read pack %s: %w", path, err)
	}
	if off, err := checkPackHeader(hdr, seq); err != nil {
		if errors.Is(err, errVersion) {
			return fmt.Errorf("pack %s: %w: %v", path, ErrUnsupportedVersion, err)
		}
		problem(name, off, "%v; no value of this pack is readable", err)
		return nil
	}
	version := hdr[4]
	damaged := false
	var covered int64
	var entries []idxEntry
	idxOK := false
	if hasIdx {
		iname := idxName(seq)
		b, err := os.ReadFile(filepath.Join(v.Dir, iname))
		if err != nil {
			return fmt.Errorf("read pack index %s: %w", filepath.Join(v.Dir, iname), err)
		}
		var off int64
		covered, _, entries, off, err = decodeIndex(b, seq)
		switch {
		case errors.Is(err, errVersion):
			return fmt.Errorf("pack index %s: %w: %v", filepath.Join(v.Dir, iname), ErrUnsupportedVersion, err)
		case err != nil:
			problem(iname, off, "%v", err)
			damaged = true
		case covered > size:
			problem(name, size, "pack is %d bytes but its index covers %d: truncated", size, covered)
			damaged = true
		default:
			idxOK = true
		}
	}

	// Read every record: header and body checksums, then the values' hashes
	// (a version-2 record names its values by their hashes only through the
	// index, so an intact one is intact by construction).
	w := &window{r: f, size: size}
	type place struct {
		off    int64
		rawOff uint32
	}
	type rec struct {
		ref    Ref
		size   uint32
		rawLen uint32
	}
	records := map[place]rec{}
	var damagedRanges [][2]int64
	off := int64(packHeaderSize)
	end := off
	var tail int64
	for off < size {
		r, err := recordAt(w, off, version)
		if err == nil && version == 1 {
			hb, rerr := w.read(off, recordHeaderSize)
			if rerr != nil {
				return fmt.Errorf("read pack %s at offset %d: %w", path, off, rerr)
			}
			h, _ := parseRecordHeader(hb)
			body, rerr := w.read(off+recordHeaderSize, int(h.storedLen))
			if rerr != nil {
				return fmt.Errorf("read pack %s at offset %d: %w", path, off, rerr)
			}
			raw, derr := decodeBody(h, body)
			switch {
			case derr != nil:
				problem(name, off, "record of value %s: %v", h.ref, derr)
				damaged = true
				r.vals = nil
			case RefOf(raw) != h.ref:
				problem(name, off, "record of value %s: value does not hash to its SHA-256", h.ref)
				damaged = true
				r.vals = nil
			}
		}
		if err == nil {
			for _, m := range r.vals {
				v.intact[m.ref] = struct{}{}
				records[place{off, m.rawOff}] = rec{m.ref, uint32(r.size), m.rawLen}
			}
			off += r.size
			end = off
			continue
		}
		var ioe ioError
		if errors.As(err, &ioe) {
			return fmt.Errorf("read pack %s at offset %d: %w", path, off, ioe.err)
		}
		next, ferr := resync(w, off+1, version)
		if ferr != nil {
			return fmt.Errorf("scan pack %s: %w", path, ferr)
		}
		if next < 0 {
			tail = size - off
			break
		}
		problem(name, off, "%v; %d bytes up to the next intact record are unreadable", err, next-off)
		damagedRanges = append(damagedRanges, [2]int64{off, next})
		damaged = true
		off = next
	}
	if tail > 0 {
		if damaged || (hasIdx && !idxOK) || (idxOK && end < covered) {
			problem(name, end, "%d bytes after the last intact record hold no intact record", tail)
			damagedRanges = append(damagedRanges, [2]int64{end, size})
		} else {
			v.Notes = append(v.Notes, fmt.Sprintf("%s: torn tail of %d bytes at offset %d (appends in flight at a crash; cut on next open)",
				path, tail, end))
		}
	}
	if idxOK {
		for _, e := range entries {
			r, ok := records[place{int64(e.off), e.rawOff}]
			if ok && r.ref == e.ref && r.size == e.size && (version == 1 || r.rawLen == e.rawLen) {
				continue
			}
			inDamage := false
			for _, d := range damagedRanges {
				inDamage = inDamage || (int64(e.off) >= d[0] && int64(e.off) < d[1])
			}
			if !inDamage && !ok {
				problem(idxName(seq), e.at, "entry for value %s points at offset %d where no intact record starts", e.ref, e.off)
			} else if ok {
				problem(idxName(seq), e.at, "entry for value %s points at a record of value %s", e.ref, r.ref)
			}
		}
	}
	return nil
}
